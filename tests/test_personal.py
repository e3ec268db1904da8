"""The personal model as a researcher meets it: decisions move the queue, explained, measured."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from assistant.index import Row
from assistant.models import Status
from assistant.personal import TextFeatures, load_features, rank, store_ranking
from assistant.personal.model import Labels, average_precision
from assistant.store import Store
from conftest import shared

runner = CliRunner()
INTEREST = re.compile(r"knowledge|factual", re.IGNORECASE)  # what the agenda does not say


def run(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env={"COLUMNS": "200"}, input=input)


def ranked_json(*args: str) -> list[dict[str, object]]:
    result = run("ranked", "--json", *args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]


def open_store() -> Store:
    return Store.open(load_settings())


@pytest.fixture
def demo(demo_store: Path) -> Path:
    """The sample store, assessed offline with the example agenda."""
    return demo_store


def is_wanted(record: dict[str, object]) -> bool:
    paper = record["paper"]
    assert isinstance(paper, dict)
    return bool(INTEREST.search(f"{paper['title']} {paper['abstract']}"))


def decide_like_a_knowledge_researcher(count: int) -> list[dict[str, object]]:
    """Work down the queue: accept papers about knowledge in models, reject the rest; return the decided."""
    decided = ranked_json("--top", str(count))
    accept = [str(r["paper"]["id"]) for r in decided if is_wanted(r)]  # type: ignore[index]
    reject = [str(r["paper"]["id"]) for r in decided if not is_wanted(r)]  # type: ignore[index]
    assert accept and reject
    assert run("mark", *accept, "--accept").exit_code == 0
    assert run("mark", *reject, "--reject").exit_code == 0
    return decided


def undecided_ap(records: list[dict[str, object]]) -> float:
    rest = [r for r in records if r["decision"]["status"] == "new"]  # type: ignore[index]
    relevant = np.array([is_wanted(r) for r in rest])
    return average_precision(-np.arange(len(rest), dtype=float), relevant)


def test_no_decisions_keeps_the_engine_order_and_says_why(demo: Path) -> None:
    before = ranked_json("--top", "200")
    relevances = [r["assessment"]["relevance"] for r in before]  # type: ignore[index]
    assert relevances == sorted(relevances, reverse=True)
    assert all(r["score"] == r["assessment"]["relevance"] and r["ranked_by"] == "engine" for r in before)  # type: ignore[index]
    shown = run("show", str(before[0]["paper"]["id"]))  # type: ignore[index]
    assert "learns from your first accept" in " ".join(shown.output.split())


def test_decisions_move_the_queue_towards_what_was_accepted(demo: Path) -> None:
    engine_order = ranked_json("--top", "200")
    decide_like_a_knowledge_researcher(30)
    personal = store_ranking(open_store())
    assert personal.ranking.personal, personal.ranking.fit.note
    assert "learned from 30 decisions" in personal.ranking.fit.note
    blended = ranked_json("--top", "200")
    # The same undecided papers, ordered by the engine alone and by the blend.
    engine_rest = [r for r in engine_order if r["paper"]["id"] in {b["paper"]["id"] for b in blended}]  # type: ignore[index]
    for record in engine_rest:
        record["decision"] = next(b["decision"] for b in blended if b["paper"]["id"] == record["paper"]["id"])  # type: ignore[index]
    assert undecided_ap(blended) > undecided_ap(engine_rest) + 0.05
    # The score shown keeps the 0-10 scale and follows the blended order.
    scores = [r["score"] for r in blended]
    assert scores == sorted(scores, reverse=True) and 0 <= min(scores) and max(scores) <= 10  # type: ignore[type-var]


def test_show_explains_a_move_with_the_nearest_decided_papers(demo: Path) -> None:
    decided = decide_like_a_knowledge_researcher(30)
    decided_titles = {str(r["paper"]["title"]) for r in decided}  # type: ignore[index]
    personal = store_ranking(open_store()).ranking
    moved = max(
        (
            pid
            for i, pid in enumerate(personal.ids)
            if personal.explain(pid) is not None and personal.labels.y[i] < 0
        ),
        key=lambda pid: abs(personal.explain(pid).moved),  # type: ignore[union-attr]
    )
    out = run("show", moved).output
    head = re.search(
        r"your decisions moved it (up|down) \d+ places? "
        r"\(#\d+ → #(\d+) of (\d+) (still to decide|assessed)\)",
        out,
    )
    assert head and head.group(4) == "still to decide", out
    # The place is the row 'triage ranked' prints the paper on.
    queue = [str(r["paper"]["id"]) for r in ranked_json("--top", "500")]  # type: ignore[index]
    assert queue.index(moved) + 1 == int(head.group(2)) and len(queue) == int(head.group(3))
    nearest = re.search(r"nearest accepted: (.+?) \(0\.\d\d\)", out.replace("\n", " "))
    assert nearest and any(nearest.group(1).startswith(t[:30]) for t in decided_titles)
    assert "nearest rejected:" in out
    # The model's own reasons: words of the paper, weighed by the decisions.
    assert personal.fit.active, personal.fit.note
    assert personal.model is not None
    undecided = np.flatnonzero((personal.labels.y < 0) & np.isfinite(personal.blended))
    liked = personal.ids[int(undecided[np.argmax(personal.model[undecided])])]
    explanation = personal.explain(liked)
    assert explanation is not None and explanation.words_for, explanation
    item = open_store().get(liked)
    assert item is not None
    text = f"{item.paper.title} {item.paper.abstract}".lower()
    assert all(part in text for word in explanation.words_for for part in word.split())
    shown = " ".join(run("show", liked).output.split())
    assert f"words your decisions weigh for it: {', '.join(explanation.words_for)}" in shown


def test_rejections_alone_leave_the_engine_order_and_the_first_accept_teaches(demo: Path) -> None:
    top = ranked_json("--top", "12")
    ids = [str(r["paper"]["id"]) for r in top]  # type: ignore[index]
    assert run("mark", *ids[:3], "--reject").exit_code == 0
    ranking = store_ranking(open_store()).ranking
    assert not ranking.personal and "none of them an accept" in ranking.fit.note
    first = ranked_json("--top", "1")[0]
    assert first["score"] == first["assessment"]["relevance"] and first["ranked_by"] == "engine"  # type: ignore[index]
    # The table says why the decisions leave the order as the engine's.
    assert "none of them an accept" in " ".join(run("ranked", "--top", "3").output.split())
    # One accept: the queue learns from it at once, and moves only a little.
    assert run("mark", ids[3], "--accept").exit_code == 0
    ranking = store_ranking(open_store()).ranking
    assert ranking.personal and "learned from 4 decisions" in ranking.fit.note
    engine_top = [pid for pid in ids[4:] if pid in ranking.position][:8]
    blended_top = [pid for pid in ranking.relevance_order() if ranking.undecided[ranking.position[pid]]][:8]
    assert len(set(engine_top) & set(blended_top)) >= 5, (engine_top, blended_top)


def test_the_model_is_derived_state_rebuilt_from_the_store(demo: Path, isolated: Path) -> None:
    decide_like_a_knowledge_researcher(30)
    first = store_ranking(open_store())
    cache = Path(isolated.parent / "home" / ".cache" / "triage" / "personal")
    files = list(cache.glob("*.pickle"))
    assert len(files) == 1
    # Bytes overwritten inside the file (it still unpickles, with nonsense numbers in it).
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2 : len(data) // 2 + 20] = b"\x7f" * 20
    files[0].write_bytes(bytes(data))
    damaged = store_ranking(open_store())
    assert any("could not be read" in n for n in damaged.notes)
    # Trained again from the kept weights: the same optimum, to the solver's tolerance.
    np.testing.assert_allclose(damaged.ranking.blended, first.ranking.blended, atol=1e-4)
    files[0].write_bytes(b"not a pickle")
    again = store_ranking(open_store())
    assert any("could not be read" in n for n in again.notes)
    assert again.ranking.ids == first.ranking.ids
    np.testing.assert_allclose(again.ranking.blended, first.ranking.blended, atol=1e-4)
    files[0].unlink()
    rebuilt = store_ranking(open_store())
    np.testing.assert_allclose(rebuilt.ranking.blended, first.ranking.blended, atol=1e-4)
    # The command line says it in one line, without a traceback.
    files = list(cache.glob("*.pickle"))
    files[0].write_bytes(pickle.dumps({"version": 1, "location": "elsewhere"}))
    result = run("ranked", "--top", "3")
    assert result.exit_code == 0 and "Traceback" not in result.output


def test_new_papers_are_read_into_the_cached_features(demo: Path, isolated: Path) -> None:
    store = open_store()
    texts, _ = load_features(store)
    before = len(texts.ids)
    assert run("ingest", str(shared("realworld", "bibtex_bbt_export_901.bib"))).exit_code == 0
    texts, _ = TextFeatures.open(store)
    assert texts.refresh(store) and len(texts.ids) > before
    words, vectors = texts.rows([texts.ids[-1], "no-such-paper"])
    assert words[0].nnz > 0 and vectors[0].any() and words[1].nnz == 0 and not vectors[1].any()


def test_library_imported_with_accept_seeds_the_profile(demo: Path) -> None:
    library = shared("realworld", "bibtex_bbt_export_901.bib")
    result = run("ingest", str(library), "--accept", "--list", "My library")
    assert result.exit_code == 0, result.output
    assert "Marked 36 papers accepted" in result.output and "reading list 'My library'" in result.output
    listed = run("list", "show", "My library").output
    assert "Exact Philosophy" in listed.replace("\n", " ") or "36" in listed
    assert run("tag").exit_code == 0
    ranking = store_ranking(open_store()).ranking
    # Seeds alone (no queue decision at all) are enough: the engine did not choose them.
    assert ranking.fit.personal, ranking.fit.note
    rows = [Row.from_metadata(pid, meta) for pid, meta in open_store().iter_metadata()]
    assert sum(r.seed for r in rows) == 36
    # A decision made later in the queue is the researcher's own, not a seed any more.
    seeded = next(r.id for r in rows if r.seed)
    assert run("mark", seeded, "--reject").exit_code == 0
    assert not Row.from_metadata(seeded, open_store().metadata([seeded])[0][1]).seed
    # Importing the library again keeps that rejection: the researcher's own decision stands.
    again = run("ingest", str(library), "--accept")
    assert "Marked 0 papers accepted" in again.output and "1 paper you had already decided" in again.output
    item = open_store().get(seeded)
    assert item is not None and item.decision.status is Status.REJECTED


def test_uncertain_and_disagreement_sorts(demo: Path) -> None:
    empty = run("ranked", "--sort", "uncertain", "--top", "3")
    assert empty.exit_code == 0 and "No personal model yet" in empty.output
    decide_like_a_knowledge_researcher(30)
    uncertain = ranked_json("--sort", "uncertain", "--top", "10")
    assert len(uncertain) == 10 and all(r["decision"]["status"] == "new" for r in uncertain)  # type: ignore[index]
    ranking = store_ranking(open_store()).ranking
    values = [ranking.uncertain(str(r["paper"]["id"])) for r in uncertain]  # type: ignore[index]
    assert values == sorted(values)
    table = run("ranked", "--sort", "disagreement", "--top", "5")
    assert "disagree most" in table.output and re.search(r"new [↑↓]", table.output)


def test_export_and_digest_follow_the_blended_order(demo: Path) -> None:
    decide_like_a_knowledge_researcher(30)
    blended = [r["paper"]["id"] for r in ranked_json("--top", "200")]  # type: ignore[index]
    out = run("export", "--status", "new", "-f", "jsonl")
    exported = [json.loads(line)["paper"]["id"] for line in out.output.splitlines() if line.startswith("{")]
    assert exported == [pid for pid in blended if pid in set(exported)]
    digest = run("digest", "--since", "1d")
    assert digest.exit_code == 0 and "# Paper digest" in digest.output


def test_eval_reports_agreement_held_out(demo: Path) -> None:
    assert "too few" in run("eval").output.lower()
    # Accepts only: every order agrees with them perfectly, so nothing is measured yet.
    top = [str(r["paper"]["id"]) for r in ranked_json("--top", "6")]  # type: ignore[index]
    assert run("mark", *top, "--accept").exit_code == 0
    one_sided = run("eval").output
    assert "too few decisions to measure" in one_sided.lower() and "1.000" not in one_sided
    assert run("mark", *top, "--new").exit_code == 0
    decide_like_a_knowledge_researcher(40)
    out = run("eval").output
    for expected in ("engine", "decisions' part", "blend", "P@10", "ROC-AUC", "WSS@95", "Calibration"):
        assert expected in out, out
    report = json.loads(run("eval", "--json").output.splitlines()[-1])
    names = [r["name"] for r in report["rankers"]]
    assert names == ["engine", "decisions' part", "blend"]
    assert report["decided"] == 40 and sum(b["papers"] for b in report["calibration"]) == 40
    blend = report["rankers"][2]
    assert 0 <= blend["average_precision"] <= 1 and blend["roc_auc"] > 0.5
    # What the queue uses, for a script as for the reader.
    assert report["in_use"] == "engine + model" and report["engine_weight"] > 0
    assert 0 < report["random_ap"] < 1 and "The queue uses" in out
    # How many relevant papers are left, with an interval, and the way to a guarantee.
    left = report["estimate"]
    assert left["low"] <= left["left"] <= left["high"] <= left["undecided"]
    assert "relevant left among" in left["line"] and "triage check" in " ".join(out.split())


def test_suggest_agenda_proposes_what_no_topic_covers(demo: Path) -> None:
    library = shared("realworld", "bibtex_bbt_export_901.bib")
    assert run("ingest", str(library), "--accept").exit_code == 0
    assert run("tag").exit_code == 0
    agenda_before = (demo / "agenda.md").read_text()
    out = run("suggest-agenda")
    assert out.exit_code == 0
    assert re.search(r"^## \S", out.output, re.MULTILINE), out.output
    assert "philosoph" in out.output.lower()
    assert (demo / "agenda.md").read_text() == agenda_before  # printed, never written
    # Too few to suggest from: the uncovered accepted papers are named.
    few = run("suggest-agenda", "--min-papers", "1000").output
    assert "too few" in few and re.search(r"^  .+ \((doi|arxiv|title):", few, re.MULTILINE), few


def test_labels_weigh_stars_and_maybes() -> None:
    labels = Labels.from_decisions(
        [Status.ACCEPTED, Status.ACCEPTED, Status.MAYBE, Status.REJECTED, Status.NEW, Status.REJECTED],
        [False, True, False, False, False, True],
    )
    assert labels.y.tolist() == [1, 1, 1, 0, -1, 0]
    assert labels.weight.tolist() == [1.0, 2.0, 0.3, 1.0, 0.0, 1.0]
    assert labels.positives == 2 and labels.negatives == 2 and labels.decided == 5


def test_rank_without_vectors_or_words_still_ranks(demo: Path) -> None:
    store = open_store()
    rows = [Row.from_metadata(pid, meta) for pid, meta in store.iter_metadata()]
    empty = TextFeatures(location="none")
    ranking = rank(empty, rows)
    assert not ranking.personal
    assessed = [r for r in rows if r.relevance is not None]
    best = max(assessed, key=lambda r: r.relevance or 0)
    assert ranking.score(best.id) == pytest.approx(best.relevance, abs=0.01)


def test_precomputed_orders_match_the_queue_and_follow_rows_changed_meanwhile(demo: Path) -> None:
    """The UI sorts the queue in the retrain's thread (numpy) and swaps the order in; rows that
    changed while it trained move to their places, as if sorted afresh."""
    from dataclasses import replace

    from assistant.index import QueueIndex, Sort, sort_key

    decide_like_a_knowledge_researcher(30)
    store = open_store()
    index = QueueIndex(location="test")
    index.build(store)
    texts, _ = load_features(store)
    rows = list(index.rows.values())
    ranking = rank(texts, rows)
    order = ranking.relevance_order()
    assert order == [r.id for r in sorted(rows, key=sort_key(Sort.RELEVANCE, ranking))]
    version = index.version
    # Meanwhile a refresh brings a paper the ranking has not seen, assessed high: it goes to
    # its place in the swapped-in order, as a fresh sort would put it.
    newcomer = replace(index.rows[order[-1]], id="arxiv:2611.00001", relevance=9.99)
    index.apply([newcomer])
    index.set_ranking(ranking, {Sort.RELEVANCE: list(order)}, version)
    fresh = [r.id for r in sorted(index.rows.values(), key=sort_key(Sort.RELEVANCE, ranking))]
    # It came from the bottom of the order; assessed 9.99, it sits near the top now.
    assert index.order(Sort.RELEVANCE) == fresh and fresh.index(newcomer.id) < 20

    # A paper deleted while the model retrains leaves the swapped-in order too.
    version, before = index.version, list(index.order(Sort.RELEVANCE))
    gone = before[0]
    index.remove([gone])
    index.set_ranking(ranking, {Sort.RELEVANCE: before}, version)
    assert gone not in index.order(Sort.RELEVANCE)
    assert index.order(Sort.RELEVANCE) == [
        r.id for r in sorted(index.rows.values(), key=sort_key(Sort.RELEVANCE, ranking))
    ]


def test_a_high_not_interested_score_does_not_cover_an_accepted_paper() -> None:
    from types import SimpleNamespace

    from assistant.personal.suggest import uncovered

    def row(status: Status, **topics: int) -> SimpleNamespace:
        return SimpleNamespace(id="p", status=status, starred=False, topics=topics)

    rows = [
        row(Status.ACCEPTED, Speech=1, Other=6),  # "Other" is the agenda's Not interested
        row(Status.ACCEPTED, Speech=2, Other=0),
        row(Status.ACCEPTED, Speech=7, Other=0),
        row(Status.REJECTED, Speech=0, Other=0),
    ]
    assert len(uncovered(rows, 4)) == 1  # type: ignore[arg-type]
    assert len(uncovered(rows, 4, ignore=["Other"])) == 2  # type: ignore[arg-type]


def test_decisions_never_lift_what_the_agenda_excludes() -> None:
    """Accepted papers that happen to score on "Not interested" (they share its words) must not
    teach the queue that a high "Not interested" score is a reason to read a paper."""
    from types import SimpleNamespace

    def row(i: int, status: Status, relevance: float, agenda: int, excluded: int) -> SimpleNamespace:
        return SimpleNamespace(
            id=f"p{i}",
            title=f"paper {i}",
            status=status,
            starred=False,
            seed=False,
            relevance=relevance,
            topics={"Retrieval": agenda, "Not interested": excluded},
        )

    rows = []
    for i in range(8):  # accepted: on the agenda, and a word of the exclusions too
        rows.append(row(i, Status.ACCEPTED, 8.0 - i * 0.2, 8, 7))
    for i in range(8, 14):  # rejected: on the agenda's words, nothing excluded
        rows.append(row(i, Status.REJECTED, 8.1 - (i - 8) * 0.3, 8, 0))
    for i in range(14, 40):  # undecided, mildly relevant
        rows.append(row(i, Status.NEW, 4.0 - (i - 14) * 0.1, 4, 0))
    rows.append(row(40, Status.NEW, 0.0, 1, 9))  # what the agenda excludes
    ranking = rank(TextFeatures(location="none"), rows, ["Retrieval", "Not interested"])  # type: ignore[arg-type]
    order = sorted((r.id for r in rows if r.status is Status.NEW), key=lambda p: -ranking.key(p, None))
    assert order[-1] == "p40", order.index("p40")


def sparse_words(n: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    from scipy import sparse

    return sparse.random(n, 30, density=0.2, format="csr", random_state=rng)


def random_papers(n: int, seed: int):  # type: ignore[no-untyped-def]
    """The model's features, the engine's relevance and the ids of n random papers."""
    from assistant.personal import model as personal_model

    rng = np.random.default_rng(seed)
    X = personal_model.features(
        sparse_words(n, rng), rng.normal(size=(n, 8)).astype(np.float32), np.zeros((n, 0))
    )
    return X, rng.random(n) * 10, [f"p{i}" for i in range(n)]


def test_a_paper_is_placed_among_the_papers_still_to_decide_starred_ones_too() -> None:
    """'#4 of 57 still to decide' is the row `ranked` prints it on: a starred paper left new is
    still in that queue, and counts in the places of the others."""
    from types import SimpleNamespace

    def row(i: int, status: Status, relevance: float, starred: bool = False) -> SimpleNamespace:
        return SimpleNamespace(
            id=f"p{i}", title=f"paper {i}", status=status, starred=starred, seed=False,
            relevance=relevance, topics={"Retrieval": int(relevance)},
        )  # fmt: skip

    rows = [row(i, Status.ACCEPTED, 9.0 - i * 0.1) for i in range(3)]
    rows += [row(3, Status.REJECTED, 8.5)]
    rows += [row(i, Status.NEW, 8.0 - i * 0.1, starred=i in (5, 7)) for i in range(4, 20)]
    ranking = rank(TextFeatures(location="none"), rows, ["Retrieval"])  # type: ignore[arg-type]
    queue = sorted((r.id for r in rows if r.status is Status.NEW), key=lambda p: -ranking.key(p, None))
    for place, pid in enumerate(queue, start=1):
        explanation = ranking.explain(pid)
        assert explanation is not None and explanation.undecided
        assert (explanation.place, explanation.of) == (place, len(queue)), pid
    accepted = ranking.explain("p0")
    assert accepted is not None and not accepted.undecided and accepted.of == len(rows)


def test_the_same_decisions_give_the_same_order_in_every_command(demo: Path) -> None:
    """There is no choice to remember between commands: the model is the one optimum of its
    decisions, so `ranked`, `export`, `show` and a new review session (which starts from no
    previous fit) order the queue alike."""
    from assistant.personal.model import fit

    decide_like_a_knowledge_researcher(30)
    first = store_ranking(open_store()).ranking
    again = store_ranking(open_store()).ranking
    assert first.relevance_order() == again.relevance_order()
    # Trained from the last fit (the review UI after a decision) or from scratch: the same optimum.
    X, labels = first.feature_rows, first.labels
    assert X is not None
    engine = np.where(np.isfinite(first.engine), first.engine, np.nanmin(first.engine))
    warm = fit(X, engine, labels, first.ids, first.fit)
    cold = fit(X, engine, labels, first.ids, None)
    assert warm.model is not None and cold.model is not None
    np.testing.assert_allclose(
        warm.model.logit(X, warm.engine_z(engine)), cold.model.logit(X, cold.engine_z(engine)), atol=0.02
    )


def test_a_place_in_show_is_the_row_ranked_prints_when_scores_tie(demo: Path) -> None:
    """An LLM's scores tie often (whole numbers): `show`'s "#k of N", the row `ranked` prints it
    on and the review UI's order break ties the same way (the newer paper, then the id)."""
    from assistant.index import QueueIndex, Sort, sort_key

    store = open_store()
    whole = {
        i.paper.id: i.assessment.model_copy(update={"relevance": float(round(i.assessment.relevance))})
        for i in store.iter_all()
        if i.assessment is not None
    }
    store.set_assessments(whole)
    top = [str(r["paper"]["id"]) for r in ranked_json("--top", "3")]  # type: ignore[index]
    assert run("mark", *top, "--reject").exit_code == 0  # decisions, and still the engine's order
    ranking = store_ranking(open_store()).ranking
    assert not ranking.personal
    records = ranked_json("--top", "80")
    ids = [str(r["paper"]["id"]) for r in records]  # type: ignore[index]
    scores = [ranking.key(pid, None) for pid in ids]
    assert len(set(scores)) < len(scores) - 10, "whole-number scores should tie often"
    places = [ranking.explain(pid).place for pid in ids]  # type: ignore[union-attr]
    assert places == list(range(1, len(ids) + 1))
    index = QueueIndex(location="ties")
    index.build(open_store())
    queue = sorted(
        (r for r in index.rows.values() if r.status is Status.NEW and r.relevance is not None),
        key=sort_key(Sort.RELEVANCE, ranking),
    )
    assert [r.id for r in queue[: len(ids)]] == ids
