"""ASReview's default model on one screening dataset: the order its simulation screens records in.

    ASREVIEW_PYTHON bench/asreview_sim.py DATA.csv[.gz] SEED

Run by bench/screening.py with the Python of an environment that has ASReview (never the
project's own: `make asreview` builds `.venv-asreview`). The simulation is ASReview's own
(`Simulate`, the default model `elas_u4`: TF-IDF of 1-2 grams, a linear SVM, balanced sample
weights, most-likely-relevant first), started as `asreview simulate --n-prior-included 1
--n-prior-excluded 1 --prior-seed SEED --seed SEED` starts it: one relevant and one irrelevant
record drawn at random. Prints JSON: the two prior records, then every record in the order the
model asked for it, until the last relevant one.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd
from asreview import __version__
from asreview.learner import ActiveLearningCycle
from asreview.models.models import get_ai_config
from asreview.models.queriers import TopDown
from asreview.models.stoppers import IsFittable
from asreview.simulation.simulate import Simulate


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    frame = pd.read_csv(path, keep_default_na=False)
    labels = frame["label_included"].to_numpy().astype(int)
    start = time.perf_counter()
    np.random.seed(seed)
    cycles = [
        ActiveLearningCycle(querier=TopDown(), stopper=IsFittable()),
        ActiveLearningCycle.from_meta(get_ai_config("elas_u4")["value"]),
    ]
    sim = Simulate(frame[["title", "abstract"]], labels, cycles, print_progress=False)
    pick = np.random.RandomState(seed)
    priors = [
        int(pick.choice(np.flatnonzero(labels == 1), 1)[0]),
        int(pick.choice(np.flatnonzero(labels == 0), 1)[0]),
    ]
    for record in priors:
        sim.label([record])
    sim.review()
    order = [int(r) for r in sim._results["record_id"].tolist()]
    print(
        json.dumps(
            {
                "asreview": __version__,
                "model": "elas_u4",
                "priors": priors,
                "order": order[len(priors) :],
                "seconds": time.perf_counter() - start,
            }
        )
    )


if __name__ == "__main__":
    main()
