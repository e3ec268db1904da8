"""The personal model without scipy or scikit-learn where it ranks: the same sums, the same
optimum, and no training at all when nothing changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, sparse

from assistant.config import load_settings
from assistant.models import Paper, Status
from assistant.personal import lbfgs, store_ranking
from assistant.personal import model as personal_model
from assistant.personal.csr import CSR
from assistant.personal.features import vectorizer
from assistant.personal.matrix import features
from assistant.personal.model import Labels, background, stable_order, train
from assistant.store import Store
from conftest import sample_records


def scipy_rows(rng: np.random.Generator, n: int = 40, cols: int = 25) -> sparse.csr_matrix:
    words = sparse.random(n, cols, density=0.15, format="csr", random_state=rng)
    keep = np.ones(n)
    keep[[3, n - 1]] = 0  # an empty row, and one at the end
    words = sparse.csr_matrix(sparse.diags(keep) @ words)
    words.eliminate_zeros()
    return words


def test_sparse_rows_compute_what_scipy_computes() -> None:
    rng = np.random.default_rng(0)
    words = scipy_rows(rng)
    rows = CSR.of(words)
    coef, r = rng.normal(size=words.shape[1]), rng.normal(size=words.shape[0])
    np.testing.assert_allclose(rows.dot(coef), words @ coef, atol=1e-12)
    np.testing.assert_allclose(rows.tdot(r), words.T @ r, atol=1e-12)
    picked = np.array([5, -1, 3, 39, 5])  # -1: a paper not read yet, an empty row
    taken = rows.take(picked)
    expected = words[np.where(picked >= 0, picked, 0)].toarray()
    expected[1] = 0
    np.testing.assert_allclose(taken.dot(coef), expected @ coef, atol=1e-12)
    np.testing.assert_allclose(rows.column_means(), np.asarray(words.mean(axis=0)).ravel(), atol=1e-12)
    replaced = rows.replace_rows(np.array([2, 7]), rows.take(np.array([0, 1])))
    dense = words.toarray()
    dense[[2, 7]] = dense[[0, 1]]
    np.testing.assert_allclose(replaced.dot(coef), dense @ coef, atol=1e-12)
    stacked = rows.vstack(rows.take(np.array([1])))
    assert len(stacked) == 41 and stacked.dot(coef)[-1] == pytest.approx(dense[1] @ coef)
    assert CSR.empty(0, 4).take(np.array([-1, -1])).dot(np.ones(4)).tolist() == [0.0, 0.0]


def realistic(n: int = 1200, decided: int = 300, seed: int = 0):  # type: ignore[no-untyped-def]
    """Papers with the sample's words recombined, embeddings in clusters, an engine that half
    agrees with the researcher, and the top of its queue decided."""
    rng = np.random.default_rng(seed)
    sentences = [s for r in sample_records() for s in str(r["abstract"]).split(". ") if s]
    documents = [". ".join(rng.choice(sentences, 4)) for _ in range(n)]
    words = vectorizer().fit_transform(documents).tocsr()
    centres = rng.normal(size=(12, 32))
    cluster = rng.integers(0, 12, n)
    vectors = centres[cluster] + rng.normal(scale=0.7, size=(n, 32))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    topics = rng.integers(0, 11, size=(n, 3)).astype(np.float64)
    engine = topics.max(axis=1) + rng.random(n)
    wanted = (cluster < 4) | (rng.random(n) < 0.05)
    statuses = [Status.NEW] * n
    for i in np.argsort(-engine)[:decided]:
        statuses[i] = Status.ACCEPTED if wanted[i] else Status.REJECTED
    labels = Labels.from_decisions(statuses, [False] * n)
    ids = [f"p{i}" for i in range(n)]
    return words, vectors, topics, engine, labels, ids


def scipy_train(words, vectors, topics, engine_z, labels, rows, presumed, **options):  # type: ignore[no-untyped-def]
    """The regression as it was trained before: scipy's L-BFGS-B on a scipy sparse matrix."""
    m = personal_model
    matrix = sparse.hstack(
        [words, sparse.csr_matrix(vectors.astype(np.float64)), sparse.csr_matrix(topics / 10.0)], format="csr"
    )
    index = np.concatenate([rows, presumed])
    y = np.concatenate([labels.y[rows], np.zeros(len(presumed))]).astype(np.float64)
    w = np.concatenate([labels.weight[rows], np.full(len(presumed), m.BACKGROUND_WEIGHT)])
    positive = y == 1
    w[positive] *= max(1.0, m.POSITIVE_RATIO * w[~positive].sum() / w[positive].sum())
    Xt, e = matrix[index], engine_z[index]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, coef = theta[0], theta[1], theta[2:]
        z = a + b * e + Xt @ coef
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        value = (
            float(np.sum(w * (np.logaddexp(0.0, z) - y * z)))
            + 0.5 * m.L2 * float(coef @ coef)
            + 0.5 * ((b - m.ENGINE_WEIGHT) / m.ENGINE_WEIGHT_SD) ** 2
            + 0.5 * m.INTERCEPT_L2 * a * a
        )
        r = w * (p - y)
        grad = np.concatenate(
            [[r.sum() + m.INTERCEPT_L2 * a, r @ e + (b - m.ENGINE_WEIGHT) / m.ENGINE_WEIGHT_SD**2]]
        )
        return value, np.concatenate([grad, Xt.T @ r + m.L2 * coef])

    start = np.concatenate([[0.0, m.ENGINE_WEIGHT], np.zeros(matrix.shape[1])])
    result = optimize.minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 300, **options})
    return result.x, loss, matrix


def test_the_numpy_solver_finds_scipys_optimum_and_order() -> None:
    words, vectors, topics, engine, labels, ids = realistic()
    X = features(words, vectors, topics)
    engine_z = (engine - engine.mean()) / engine.std()
    rows, presumed = np.flatnonzero(labels.y >= 0), background(labels, stable_order(ids))
    model = train(X, engine_z, labels, rows, presumed)
    theirs, loss, matrix = scipy_train(words, vectors, topics, engine_z, labels, rows, presumed)
    mine, value = model.theta, loss(model.theta)[0]
    assert abs(value - loss(theirs)[0]) <= 1e-6 * abs(value)
    assert value <= loss(theirs)[0] + 1e-9 * abs(value)  # at least as close to the optimum
    # Both run to the optimum: every paper in the same order.
    tight, _, _ = scipy_train(
        words, vectors, topics, engine_z, labels, rows, presumed, ftol=1e-15, gtol=1e-10, maxiter=3000
    )
    ours = model.intercept + model.engine_weight * engine_z + model.personal(X)
    scipys = tight[0] + tight[1] * engine_z + matrix @ tight[2:]
    np.testing.assert_allclose(ours, scipys, atol=1e-4)
    assert np.argsort(-ours, kind="stable").tolist() == np.argsort(-scipys, kind="stable").tolist()
    np.testing.assert_allclose(mine, tight, atol=1e-4)


def test_a_spectrum_of_the_last_optimum_brings_the_next_one_in_a_few_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The steep directions kept from one solve start the next (one more decision) close: the
    same optimum as from scratch, in a fraction of the evaluations."""
    monkeypatch.setattr(personal_model, "LARGE_PROBLEM", 0)  # learn one on this small problem
    evaluations: list[int] = []
    solve = lbfgs.minimize

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        solution = solve(*args, **kwargs)
        evaluations.append(solution.evaluations)
        return solution

    monkeypatch.setattr(lbfgs, "minimize", counted)
    words, vectors, topics, engine, labels, ids = realistic()
    X = features(words, vectors, topics)
    engine_z = (engine - engine.mean()) / engine.std()
    order = stable_order(ids)
    first = train(X, engine_z, labels, np.flatnonzero(labels.y >= 0), background(labels, order), learn=True)
    assert first.spectrum is not None and len(first.spectrum) > 3
    statuses = [Status.ACCEPTED if y == 1 else Status.REJECTED if y == 0 else Status.NEW for y in labels.y]
    statuses[int(np.flatnonzero(labels.y < 0)[0])] = Status.ACCEPTED
    after = Labels.from_decisions(statuses, [False] * len(ids))
    rows, presumed = np.flatnonzero(after.y >= 0), background(after, order)
    warm = train(X, engine_z, after, rows, presumed, first, learn=True)
    cold = train(X, engine_z, after, rows, presumed)
    assert evaluations[1] * 3 < evaluations[2], evaluations
    np.testing.assert_allclose(warm.personal(X), cold.personal(X), atol=1e-3)


def test_lanczos_finds_the_steep_directions_of_a_matrix() -> None:
    rng = np.random.default_rng(1)
    basis, _ = np.linalg.qr(rng.normal(size=(60, 60)))
    values = np.concatenate([[400.0, 90.0, 30.0, 9.0], np.full(56, 1.5)])
    matrix = (basis * values) @ basis.T
    found = lbfgs.spectrum(lambda v: matrix @ v, 60, 30, flat=1.0)
    np.testing.assert_allclose(np.sort(found.curvatures)[::-1], [400.0, 90.0, 30.0, 9.0], rtol=1e-6)
    # Its inverse: exact along the steep directions, the flat curvature's elsewhere.
    assumed = (basis * np.concatenate([values[:4], np.full(56, found.flat)])) @ basis.T
    g = rng.normal(size=60)
    np.testing.assert_allclose(found.inverse(g), np.linalg.solve(assumed, g), rtol=1e-6, atol=1e-9)


def test_the_same_decisions_are_not_trained_again(decided: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = store_ranking(Store.open(load_settings()), with_estimate=True)
    assert first.ranking.personal
    # Every training, the queue's model's and the estimate's folds', is one solve: where each
    # started.
    starts: list[np.ndarray] = []
    minimize_ = lbfgs.minimize

    def spy(fun, x0, *args, **kwargs):  # type: ignore[no-untyped-def]
        starts.append(np.array(x0))
        return minimize_(fun, x0, *args, **kwargs)

    monkeypatch.setattr(lbfgs, "minimize", spy)
    again = store_ranking(Store.open(load_settings()), with_estimate=True)
    assert not starts  # not the model, nor the estimate's folds
    np.testing.assert_array_equal(again.ranking.blended, first.ranking.blended)
    assert again.ranking.estimate is not None and first.ranking.estimate is not None
    assert again.ranking.estimate.line() == first.ranking.estimate.line()
    # One more decision: trained once, from the kept weights.
    store = Store.open(load_settings())
    undecided = [pid for pid in first.ranking.ids if first.ranking.labels.y[first.ranking.position[pid]] < 0]
    store.set_status([undecided[0]], Status.ACCEPTED)
    after = store_ranking(store)
    assert len(starts) == 1 and starts[0][2:].any()  # not from zero: from the kept weights
    assert after.ranking.fit.decided == first.ranking.fit.decided + 1
    # A kept training that cannot be read is trained again.
    folder = next((decided.parent / "home" / ".cache" / "triage" / "personal").glob("*/"))
    (folder / "fit.pickle").write_bytes(b"damaged")
    rebuilt = store_ranking(Store.open(load_settings()))
    assert len(starts) == 2 and not starts[1][2:].any()
    np.testing.assert_allclose(rebuilt.ranking.blended, after.ranking.blended, atol=1e-4)


def test_ranking_an_unchanged_store_imports_neither_scipy_nor_scikit_learn(decided: Path) -> None:
    script = """
import json, sys
from assistant.config import load_settings
from assistant.models import Paper, Status
from assistant.personal import store_ranking
from assistant.store import Store
store = Store.open(load_settings())
if sys.argv[1] == "decide":
    pid = next(p for p, meta in store.iter_metadata() if meta.get("status") == "new")
    store.set_status([pid], Status.ACCEPTED)
ranking = store_ranking(store).ranking
heavy = [m for m in ("sklearn", "scipy") if m in sys.modules]
print(json.dumps({"personal": ranking.personal, "modules": heavy}))
"""
    runs = {}
    for mode in ("build", "unchanged", "decide"):
        out = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, timeout=120
        ).stdout
        runs[mode] = json.loads(out.strip().splitlines()[-1])
    assert all(run["personal"] for run in runs.values())
    assert runs["unchanged"]["modules"] == [] and runs["decide"]["modules"] == [], runs


def test_papers_read_for_the_ranking_are_what_the_index_reads(decided: Path) -> None:
    """The ranking's rows (topic scores parsed once per assessment) say what the queue index's
    rows say; a changed assessment is read again."""
    from assistant.index import Row
    from assistant.personal.rows import LazyRows, TopicMemo, paper_row

    store = Store.open(load_settings())
    metadata = list(store.iter_metadata())
    memo = TopicMemo()
    for pid, meta in metadata:
        mine, theirs = paper_row(pid, meta, memo), Row.from_metadata(pid, meta)
        fields = ("id", "title", "relevance", "topics", "status", "starred", "seed", "day")
        assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields]
    pid, meta = next((p, m) for p, m in metadata if m.get("assessment"))
    memo.changed = False
    assert paper_row(pid, meta, memo).topics == Row.from_metadata(pid, meta).topics and not memo.changed
    data = json.loads(meta["assessment"])
    data["topics"][0]["score"] = 10 - int(data["topics"][0]["score"])
    changed = {**meta, "assessment": json.dumps(data)}
    assert paper_row(pid, changed, memo).topics == Row.from_metadata(pid, changed).topics and memo.changed
    rows = LazyRows(store, [p for p, _ in metadata])
    assert len(rows) == len(metadata) and rows[pid] == Row.from_metadata(pid, meta)


def test_the_rows_kept_between_commands_follow_every_write(decided: Path, tmp_path: Path) -> None:
    """Rows kept from the last command are brought up to date from the papers written since:
    a decision (queued or not), a new paper, a paper deleted."""
    from assistant.index import Row
    from assistant.personal.rows import TopicMemo, paper_rows

    store = Store.open(load_settings())
    folder = tmp_path / "kept"

    def truth() -> dict[str, tuple[object, ...]]:
        rows = (Row.from_metadata(pid, m) for pid, m in store.iter_metadata())
        return {r.id: (r.status, r.relevance) for r in rows}

    def kept() -> dict[str, tuple[object, ...]]:
        return {r.id: (r.status, r.relevance) for r in paper_rows(store, folder, TopicMemo())}

    assert kept() == truth()
    ids = [pid for pid, _ in store.iter_metadata()]
    store.set_status(ids[:3], Status.REJECTED)
    assert kept() == truth()
    store.delete_papers(ids[3:5])
    store.upsert_papers([Paper.create(title="A new paper on sparse attention", abstract="Words.")])
    assert kept() == truth() and len(kept()) == len(ids) - 1
