"""What the personal model keeps between commands so that a decision or an import costs little:
the estimate's fold models, new text read in without scikit-learn, new papers appended to the
cached features, the rows kept as a delta. Each must give what doing it all again gives."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_learning_steady import library, places

from assistant.config import load_settings
from assistant.models import Paper, Status
from assistant.personal import bootstrap, lbfgs, load_features, store_ranking
from assistant.personal import estimate as estimate_module
from assistant.personal.bootstrap import platt, resampled_totals
from assistant.personal.csr import CSR
from assistant.personal.estimate import Estimate, Folds, estimate_folds
from assistant.personal.features import TextFeatures, cache_folder, vectorizer
from assistant.personal.model import stable_order
from assistant.personal.ranking import FeatureCache, rank
from assistant.personal.tfidf import Transform
from assistant.store import Store
from conftest import SHARED, sample_records

# -- the estimate's fold models --------------------------------------------------------------


def worked(seed: int, decisions: int):  # type: ignore[no-untyped-def]
    """The synthetic library with `decisions` taken from the top of the queue by its labels."""
    texts, papers, groups = library(seed=seed)
    wanted = set(groups["A1"]) | set(groups["B"][:10])
    order = places(texts, papers)
    for _ in range(decisions):
        pick = int(min(order, key=order.__getitem__)[1:])
        papers[pick].status = Status.ACCEPTED if pick in wanted else Status.REJECTED
        order = places(texts, papers)
    return texts, papers, wanted, order


def estimated(
    texts: TextFeatures, papers: list, kept: Folds | None = None
) -> tuple[Estimate | None, Folds | None, int]:
    """The estimate `rank` makes of these papers' decisions, starting from `kept`, and how many
    objective evaluations its fold models took."""
    cache = FeatureCache()
    ranking = rank(texts, papers, ["A", "B"], cache=cache)
    engine = ranking.engine
    filled = np.where(np.isfinite(engine), engine, np.nanmin(engine))
    labels = ranking.labels
    candidates = np.flatnonzero(ranking.undecided & np.isfinite(engine) & (labels.y < 0))
    evaluations = []
    minimize = lbfgs.minimize

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        solution = minimize(*args, **kwargs)
        evaluations.append(solution.evaluations)
        return solution

    lbfgs.minimize = counted  # type: ignore[assignment]
    try:
        left, folds = estimate_folds(
            ranking.features, filled, labels, ranking.ids, ranking.fit, candidates,
            order=stable_order(ranking.ids), kept=kept, base=b"the same features", papers=b"the same papers",
        )  # fmt: skip
    finally:
        lbfgs.minimize = minimize  # type: ignore[assignment]
    return left, folds, sum(evaluations)


def test_one_more_decision_updates_the_fold_models_to_the_estimate_made_from_scratch() -> None:
    texts, papers, wanted, order = worked(seed=2, decisions=60)
    before, folds, _ = estimated(texts, papers)
    assert before is not None and folds is not None
    pick = int(min(order, key=order.__getitem__)[1:])
    papers[pick].status = Status.ACCEPTED if pick in wanted else Status.REJECTED
    updated, kept, warm = estimated(texts, papers, folds)
    scratch, _, cold = estimated(texts, papers)
    assert updated is not None and scratch is not None and kept is not None
    # The same estimate, up to where the solver stops; the update is less work.
    assert updated.left == pytest.approx(scratch.left, abs=0.05)
    np.testing.assert_array_equal(updated.pool, scratch.pool)
    np.testing.assert_allclose(updated.chances, scratch.chances, atol=2e-3)
    assert abs(updated.low - scratch.low) <= 1 and abs(updated.high - scratch.high) <= 1
    assert warm < cold, (warm, cold)
    # The same decisions again: no fold model is trained, and the estimate is the same.
    again, _, work = estimated(texts, papers, kept)
    assert work == 0 and again is not None
    assert again.line() == updated.line()
    np.testing.assert_array_equal(again.chances, updated.chances)


def test_the_folds_are_even_and_more_decisions_move_few_papers_to_another() -> None:
    texts, papers, wanted, order = worked(seed=4, decisions=40)
    ranking = rank(texts, papers, ["A", "B"])
    keys = estimate_module.assign(ranking.ids)
    folds = estimate_module.fold_of(keys, ranking.labels)
    moved = []
    for _ in range(5):
        pick = int(min(order, key=order.__getitem__)[1:])
        papers[pick].status = Status.ACCEPTED if pick in wanted else Status.REJECTED
        order = places(texts, papers)
        labels = rank(texts, papers, ["A", "B"]).labels
        after = estimate_module.fold_of(keys, labels)
        both = (folds >= 0) & (after >= 0)
        moved.append(int((folds[both] != after[both]).sum()))
        folds = after
        # Relevant papers and the others each spread over the folds as when dealt out in turn.
        decided = labels.y >= 0
        for group in (decided & labels.relevant, decided & ~labels.relevant):
            sizes = np.bincount(folds[group], minlength=estimate_module.FOLDS)
            assert sizes.max() - sizes.min() <= 1, sizes
    assert max(moved) <= 2, moved  # the decision's own fold evens out, the rest stay


def one_at_a_time(held: np.ndarray, relevant: np.ndarray, score: np.ndarray, seed: int = 0) -> np.ndarray:
    """The resampled totals as the estimate drew and fitted them before: one resample at a time."""
    rng = np.random.default_rng(seed)
    known = np.arange(len(held))
    totals = np.empty(bootstrap.RESAMPLES)
    for i in range(bootstrap.RESAMPLES):
        pick = known[rng.integers(0, len(known), len(known))]
        if not relevant[pick].any() or relevant[pick].all():
            pick = known
        a, b = platt(held[pick], relevant[pick])
        p = 1 / (1 + np.exp(-(a + b * score[rng.integers(0, len(score))])))
        totals[i] = rng.normal(p.sum(), np.sqrt((p * (1 - p)).sum()))
    return totals


@pytest.mark.parametrize(
    ("decisions", "pool", "separable"),
    [(15, 40, True), (300, 900, False), (5000, 12000, False)],  # the last is summed by bins
)
def test_the_resamples_fitted_together_are_the_resamples_fitted_one_at_a_time(
    decisions: int, pool: int, separable: bool
) -> None:
    rng = np.random.default_rng(decisions)
    held = rng.normal(0.0, 2.0, decisions)
    relevant = held > 0.3 if separable else rng.random(decisions) < 1 / (1 + np.exp(-(held - 0.5)))
    score = rng.normal(-1.0, 2.0, (5, pool))
    together = resampled_totals(held, relevant, score, platt(held, relevant))
    alone = one_at_a_time(held, relevant, score)
    np.testing.assert_allclose(together, alone, atol=1e-3)
    binned = bootstrap.Points.of(held, relevant) is not None
    assert binned == (decisions >= 2000)


# -- new text without scikit-learn -----------------------------------------------------------

SCREENING = ("Cohen_2006_ACEInhibitors", "Cohen_2006_ADHD", "Nelson_2002", "Jeyaraman_2020")


def screening_documents(name: str) -> list[str]:
    path = SHARED / "screening" / f"{name}.csv.gz"
    if not path.is_file():
        pytest.skip(f"needs {path}: the shared fixtures beside the project")
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    return [f"{(r.get('title') or '').strip()}\n\n{(r.get('abstract') or '').strip()}" for r in records]


@pytest.mark.parametrize("corpus", ["sample", *SCREENING])
def test_the_numpy_transform_is_scikit_learns_to_the_last_bit(corpus: str) -> None:
    if corpus == "sample":
        documents = [f"{r['title']}\n\n{r['abstract']}" for r in sample_records()]
    else:
        documents = screening_documents(corpus)
    cut = int(0.8 * len(documents))
    fitted = vectorizer().fit(documents[:cut])
    numpy_transform = Transform.of(fitted)
    assert numpy_transform is not None
    new = [*documents[cut:], "", "the and of it", "Ünïcödé naïve café, résumé: ΑΒΓ δέλτα 3.5-fold"]
    theirs = CSR.of(fitted.transform(new))
    ours = numpy_transform.transform(new)
    assert ours.shape == theirs.shape and ours.nnz > 0
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)


def test_a_vectorizer_the_numpy_transform_does_not_repeat_is_left_to_scikit_learn() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    documents = [f"{r['title']}\n\n{r['abstract']}" for r in sample_records()]
    others = (
        {"analyzer": "char"},
        {"binary": True},
        {"tokenizer": str.split, "token_pattern": None},
        {"strip_accents": "ascii"},
    )
    for options in others:
        assert Transform.of(TfidfVectorizer(**options).fit(documents)) is None, options  # type: ignore[arg-type]
    # Options it repeats: another token pattern, no stop words, no idf, raw term frequency.
    plain = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b", use_idf=False, ngram_range=(1, 3)).fit(documents)
    numpy_transform = Transform.of(plain)
    assert numpy_transform is not None
    np.testing.assert_array_equal(numpy_transform.transform(documents).data, plain.transform(documents).data)


def test_new_papers_are_read_in_without_scikit_learn_and_appended_to_the_cache(decided: Path) -> None:
    first, _ = load_features(Store.open(load_settings()))
    generation, before = first.generation, len(first.ids)
    new = [
        Paper.create(title="Sparse attention for long documents", abstract="We prune attention heads."),
        Paper.create(title="A survey of retrieval for question answering", abstract="Dense retrievers."),
    ]
    Store.open(load_settings()).upsert_papers(new)
    script = """
import json, sys
from assistant.config import load_settings
from assistant.personal import store_ranking
from assistant.store import Store
ranking = store_ranking(Store.open(load_settings())).ranking
print(json.dumps({"personal": ranking.personal, "sklearn": "sklearn" in sys.modules}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"personal": True, "sklearn": False}
    # The new rows are the vectorizer's, appended to the same files; the rows before stay.
    after, _ = TextFeatures.open(Store.open(load_settings()))
    assert after.generation == generation and len(after.ids) == before + 2
    assert after.ids[:before] == first.ids
    indptr = np.asarray(after.words.indptr[: before + 1])
    np.testing.assert_array_equal(indptr, np.asarray(first.words.indptr))
    np.testing.assert_array_equal(np.asarray(after.vectors[:before]), np.asarray(first.vectors))
    texts = dict((pid, doc) for pid, doc, _ in Store.open(load_settings()).texts(after.ids[before:]))
    theirs = CSR.of(after.tfidf.transform([texts[pid] for pid in after.ids[before:]]))
    ours = after.words.take(np.arange(before, before + 2))
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)
    # The files hold what the pickle names, also for another reader of the arrays.
    folder = cache_folder(after.cache_path())
    assert np.load(folder / f"{generation}.vectors.npy", mmap_mode="r").shape[0] == before + 2


def test_without_its_numpy_transform_the_kept_vectorizer_reads_new_text_and_it_is_kept_again(
    decided: Path,
) -> None:
    texts, _ = load_features(Store.open(load_settings()))
    kept = next(cache_folder(texts.cache_path()).glob("*.transform"))
    kept.unlink()  # a cache written before the transform was kept
    paper = Paper.create(title="Pruned heads", abstract="Sparse attention.")
    Store.open(load_settings()).upsert_papers([paper])
    again, _ = load_features(Store.open(load_settings()))
    assert kept.exists()  # written again, from the vectorizer scikit-learn read
    pid = again.ids[-1]
    text = Store.open(load_settings()).texts([pid])[0][1]
    theirs = CSR.of(again.tfidf.transform([text]))
    ours = again.words.take(np.array([len(again.ids) - 1]))
    np.testing.assert_array_equal(ours.data, theirs.data)
    np.testing.assert_array_equal(ours.indices, theirs.indices)


def test_rows_a_writer_appended_without_naming_them_are_not_read(decided: Path) -> None:
    from assistant.personal.arrays import append_array

    texts, _ = load_features(Store.open(load_settings()))
    n, generation = len(texts.ids), texts.generation
    folder = cache_folder(texts.cache_path())
    # Rows appended to a file but never named by the pickle (a command stopped there, or
    # another one is appending): a reader takes the rows its pickle names.
    assert append_array(folder / f"{generation}.digests.npy", np.arange(3, dtype=np.uint64), n)
    reread, _ = TextFeatures.open(Store.open(load_settings()))
    assert len(reread.ids) == n and len(reread.digests) == n
    np.testing.assert_array_equal(np.asarray(reread.digests), np.asarray(texts.digests))
    # The next new paper is not appended after rows the pickle does not name: all are written.
    Store.open(load_settings()).upsert_papers([Paper.create(title="One more paper", abstract="Words.")])
    grown, _ = load_features(Store.open(load_settings()))
    assert len(grown.ids) == n + 1 and grown.generation != generation
    again, _ = TextFeatures.open(Store.open(load_settings()))
    np.testing.assert_array_equal(np.asarray(again.digests), np.asarray(grown.digests))
    np.testing.assert_array_equal(np.asarray(again.digests[:n]), np.asarray(texts.digests))


def test_a_new_generation_of_features_leaves_the_other_kept_state_alone(decided: Path) -> None:
    store_ranking(Store.open(load_settings()), with_estimate=True)
    texts, _ = load_features(Store.open(load_settings()))
    old = texts.generation
    folder = cache_folder(texts.cache_path())
    kept = {p.name for p in folder.iterdir() if not p.name.startswith(old)}
    assert {"rows.pickle", "topics.pickle", "fit.pickle"} <= kept
    # A paper's text changes: its row is replaced, and every row is written anew. The old
    # generation's files go once they are a minute old (another writer's may be younger).
    for file in folder.iterdir():
        os.utime(file, (time.time() - 120, time.time() - 120))
    pid, text, vector = Store.open(load_settings()).texts([texts.ids[0]])[0]
    texts.update([(pid, text + " Also pruning attention heads.", vector)])
    texts.save()
    assert texts.generation != old
    renewed, _ = TextFeatures.open(Store.open(load_settings()))
    assert renewed.generation == texts.generation and len(renewed.ids) == len(texts.ids)
    left = {p.name for p in folder.iterdir()}
    assert {"rows.pickle", "topics.pickle", "fit.pickle"} <= left
    assert not any(name.startswith(old) for name in left)


def test_two_processes_saving_at_once_leave_the_rows_the_cache_names(decided: Path) -> None:
    """Five review UIs took in the same new papers and saved at once: one removed the rows
    another had written and was about to name, and every reader rebuilt from the store."""
    texts, _ = load_features(Store.open(load_settings()))
    first, _ = TextFeatures.open(Store.open(load_settings()))
    second, _ = TextFeatures.open(Store.open(load_settings()))
    store = Store.open(load_settings())
    for features, extra in ((first, " Also pruning."), (second, " Also distillation.")):
        pid, text, vector = store.texts([features.ids[0]])[0]
        features.update([(pid, text + extra, vector)])
    real = TextFeatures._write_pickle

    def in_between(self: TextFeatures, path: Path) -> None:
        if self is second:  # its rows are written; the other saves before its pickle names them
            first.save()
        real(self, path)

    TextFeatures._write_pickle = in_between  # type: ignore[method-assign]
    try:
        second.save()
    finally:
        TextFeatures._write_pickle = real  # type: ignore[method-assign]
    reader, note = TextFeatures.open(Store.open(load_settings()))
    assert note is None
    assert reader.generation == second.generation and len(reader.ids) == len(texts.ids)


# -- the rows kept between commands ----------------------------------------------------------


def test_the_rows_kept_as_a_delta_are_the_rows_read_in_full(decided: Path, tmp_path: Path) -> None:
    from assistant.personal import rows as rows_module

    store = Store.open(load_settings())
    folder = tmp_path / "kept"

    def kept() -> dict[str, tuple[object, ...]]:
        return {
            r.id: (r.status, r.relevance, r.topics, r.starred)
            for r in rows_module.paper_rows(store, folder, rows_module.TopicMemo.load(folder))
        }

    def truth() -> dict[str, tuple[object, ...]]:
        memo = rows_module.TopicMemo()
        return {
            pid: (r.status, r.relevance, r.topics, r.starred)
            for pid, meta in store.iter_metadata()
            for r in [rows_module.paper_row(pid, meta, memo)]
        }

    assert kept() == truth()
    base = (folder / rows_module.ROWS_FILE).stat().st_mtime_ns
    ids = list(truth())
    store.set_status(ids[20:23], Status.MAYBE)
    store.update_decision(ids[24], starred=True)
    assert kept() == truth()
    assert (folder / rows_module.DELTA_FILE).exists()
    assert (folder / rows_module.ROWS_FILE).stat().st_mtime_ns == base  # one decision: not every row
    # A damaged delta: the rows written since the full file are read again.
    (folder / rows_module.DELTA_FILE).write_bytes(b"damaged")
    assert kept() == truth()


def test_a_reader_whose_generation_is_replaced_meanwhile_reads_the_new_one(
    decided: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review UI saves a new generation (and removes the old files) just after `daily` read
    the pickle naming the old one: `daily` reads the new one, not the whole store again."""
    import assistant.personal.features as features_module

    texts, _ = load_features(Store.open(load_settings()))
    old = texts.generation
    writer, _ = TextFeatures.open(Store.open(load_settings()))
    pid, text, vector = Store.open(load_settings()).texts([writer.ids[0]])[0]
    writer.update([(pid, text + " Also pruning attention heads.", vector)])
    for file in cache_folder(texts.cache_path()).iterdir():  # written a while ago: removed
        os.utime(file, (time.time() - 120, time.time() - 120))
    real = features_module.mapped
    replaced: list[str] = []

    def mapped(path: Path) -> np.ndarray:
        if not replaced:  # the other process's save lands between the pickle and the rows
            writer.save()
            replaced.append(writer.generation)
        return real(path)

    monkeypatch.setattr(features_module, "mapped", mapped)
    reader, note = TextFeatures.open(Store.open(load_settings()))
    assert note is None
    assert replaced and replaced[0] != old
    assert reader.built and reader.generation == replaced[0] and len(reader.ids) == len(texts.ids)
