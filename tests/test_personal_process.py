"""The personal model trained in a process of its own (the review UI's retrain): the same
ranking as training here, only changed papers sent again, and a child that dies or fails
makes the caller train itself."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from assistant.agenda import example_agenda_text, parse_agenda
from assistant.cli import app
from assistant.config import load_settings
from assistant.index import QueueIndex, Row
from assistant.models import Status
from assistant.personal import load_features
from assistant.personal.features import cache_folder
from assistant.personal.process import Job, Trainer, TrainerError
from assistant.personal.ranking import FeatureCache, Ranking, rank
from assistant.personal.state import Trained
from assistant.store import Store

runner = CliRunner()


@pytest.fixture
def decided(isolated: Path) -> Path:
    """The sample store, assessed offline, with decisions that teach the model."""
    assert runner.invoke(app, ["demo", "--top", "3"]).exit_code == 0
    store = Store.open(load_settings())
    ids = [pid for pid, _ in store.iter_metadata()]
    store.set_status(ids[:8], Status.ACCEPTED)
    store.set_status(ids[8:20], Status.REJECTED)
    return isolated


class Crash:
    """Unpickled by the child, it ends the child's process at once."""

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return os._exit, (3,)


def assert_same(apart: Ranking, here: Ranking) -> None:
    assert apart.ids == here.ids and apart.titles == here.titles
    np.testing.assert_allclose(apart.blended, here.blended, atol=1e-9)
    assert apart.relevance_order() == here.relevance_order()
    assert apart.fit.decided == here.fit.decided and apart.personal == here.personal
    assert apart.estimate is not None and here.estimate is not None
    assert apart.estimate.line() == here.estimate.line()
    # What the UI shows of a paper comes from the features it has itself.
    pid = apart.ids[0]
    assert apart.explain(pid) == here.explain(pid)
    # Every paper's uncertainty and disagreement at once, as the queue's sorts read them.
    ids = [*apart.ids, "not-a-paper"]
    uncertain, disagreement = apart.measures(ids)
    assert uncertain.tolist() == [here.uncertain(p) for p in ids]
    assert disagreement.tolist() == [here.disagreement(p) for p in ids]


def test_a_child_process_ranks_as_this_one_does_and_is_sent_only_what_changed(
    decided: Path, tmp_path: Path
) -> None:
    store = Store.open(load_settings())
    cache = tmp_path / "cache"
    texts, _ = load_features(store, cache)
    index = QueueIndex.open(store, cache)
    index.build(store)
    rows: list[Row] = list(index.rows.values())
    topics = [t.name for t in parse_agenda(example_agenda_text()).topics]
    folder = cache_folder(texts.cache_path(cache))
    job = Job(texts.cache_path(cache), texts.location, folder, topics, with_estimate=True)
    trainer = Trainer()
    try:
        apart = trainer.rank(job, rows, texts, FeatureCache())
        child = trainer._child
        assert child is not None and child.pid != os.getpid()
        nothing = Trained(b"", None, None)
        assert_same(apart, rank(texts, rows, topics, None, FeatureCache(), True, nothing))
        # One more accept: only that paper goes to the child, which trains from where it was,
        # as this process would, and keeps the training on disk.
        kept = Trained.load(folder)
        assert kept is not None and kept.estimated
        undecided = next(i for i, r in enumerate(rows) if r.status is Status.NEW)
        rows[undecided] = dataclasses.replace(rows[undecided], status=Status.ACCEPTED)
        job = Job(texts.cache_path(cache), texts.location, folder, topics, with_estimate=True)
        again = trainer.rank(job, rows, texts, FeatureCache())
        assert job.changed == 1 and trainer._child is child
        assert again.fit.decided == apart.fit.decided + 1
        assert_same(again, rank(texts, rows, topics, apart.fit, FeatureCache(), True, kept))
        assert Trained.load(folder).key != kept.key  # type: ignore[union-attr]
        # A child that died between retrains is replaced; the new one is sent every paper.
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert_same(trainer.rank(job, rows, texts, FeatureCache()), again)
        assert trainer._child is not None and trainer._child is not child and job.changed == -1
        # One that dies in the middle of a retrain: the caller hears it (and trains itself).
        crash = dataclasses.replace(job, topics=[Crash()])  # type: ignore[list-item]
        with pytest.raises(TrainerError, match="stopped"):
            trainer.rank(crash, rows, texts, FeatureCache())
        assert trainer._child is None
        # Features that are not on disk any more: the child says so; no hang, no ranking.
        missing = dataclasses.replace(job, features=tmp_path / "gone.pickle")
        with pytest.raises(TrainerError, match="FileNotFoundError"):
            trainer.rank(missing, rows, texts, FeatureCache())
    finally:
        trainer.close()
    assert trainer._child is None
