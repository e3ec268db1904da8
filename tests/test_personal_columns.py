"""The store's rows kept as columns (`assistant.personal.rows.PaperTable`), a paper's place
worked out when `show` asks for it, and the queue's summary read for every paper at once: each
must give what reading every paper and sorting them all gives, after a decision, an import, a
changed assessment and an agenda edit."""

from __future__ import annotations

import json
import math
import pickle
import shutil
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from assistant.agenda import load_agenda
from assistant.cli import app
from assistant.config import load_settings
from assistant.models import Paper, Status
from assistant.order import queue_key
from assistant.personal import load_features, rank, store_ranking
from assistant.personal.rows import PaperTable, TopicMemo, paper_row
from assistant.readcache import RankSummary
from assistant.store import Store
from assistant.triage.batch import tag_offline


def run(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def truth(store: Store) -> list[tuple[object, ...]]:
    """Every paper's row read from the store now, in its order."""
    memo = TopicMemo()
    rows = [paper_row(pid, meta, memo) for pid, meta in store.iter_metadata()]
    return [(r.id, r.title, r.relevance, r.topics, r.status, r.starred, r.seed, r.day) for r in rows]


def kept(store: Store) -> list[tuple[object, ...]]:
    """Every paper's row as the ranking reads it: the columns kept, brought up to date."""
    rows = store_ranking(store).papers
    assert isinstance(rows, PaperTable)
    return [(r.id, r.title, r.relevance, r.topics, r.status, r.starred, r.seed, r.day) for r in rows]


def personal_cache(home: Path) -> Path:
    return next((home / ".cache").rglob("personal"))


def test_the_kept_columns_are_the_rows_read_from_every_paper(decided: Path) -> None:
    store = Store.open(load_settings())
    assert kept(store) == truth(store)
    ids = [pid for pid, _ in store.iter_metadata()]
    # A decision, a star, a seed-free new paper, a paper assessed anew, a paper deleted.
    store.set_status(ids[25:27], Status.MAYBE)
    store.update_decision(ids[28], starred=True)
    assert kept(store) == truth(store)
    store.upsert_papers([Paper.create(title="Pruning attention heads in long documents", abstract="Words.")])
    assert kept(store) == truth(store)
    tag_offline(store, load_agenda(decided / "agenda.md"))
    assert kept(store) == truth(store)
    store.delete_papers(ids[30:32])
    assert kept(store) == truth(store)
    # The columns read back alone (no delta) are the rows too.
    for delta in personal_cache(decided.parent / "home").rglob("rows.delta.pickle"):
        delta.unlink()
    assert kept(store) == truth(store)


def test_ranking_the_columns_is_ranking_the_rows(decided: Path) -> None:
    """`rank` reads the columns as they are; given the same papers as a list of rows, it ranks
    them to the last bit the same, and explains every paper the same."""
    store = Store.open(load_settings())
    texts, _ = load_features(store)
    table = store_ranking(store).papers
    assert isinstance(table, PaperTable)
    for topics in ((), ("Sparse attention", "Not interested")):
        a = rank(texts, table, topics, with_estimate=True)
        b = rank(texts, list(table), topics, with_estimate=True)
        for field in ("engine", "blended", "shown", "model", "uncertainty", "undecided", "days"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(a.features.topics, b.features.topics)
        assert a.estimate is not None and b.estimate is not None and a.estimate.line() == b.estimate.line()
        for pid in a.ids:
            one, other = a.explain(pid), b.explain(pid)
            assert (one.lines() if one else None) == (other.lines() if other else None)


def test_a_papers_place_is_its_place_in_the_queue_sorted_in_full(decided: Path) -> None:
    """`explain` places one paper without sorting every paper: among equal scores (made here
    on purpose) the newer paper first, then the id, as `assistant.order.queue_key` sorts."""
    store = Store.open(load_settings())
    ranking = store_ranking(store).ranking
    assessed = np.isfinite(ranking.blended)
    # Ties: every score rounded to one step, so that many papers share one.
    ranking.blended = np.where(assessed, np.round(ranking.blended), -np.inf)
    ranking.engine = np.where(assessed, np.round(ranking.engine), np.nan)
    ranking.__post_init__()
    days = ranking.days if ranking.days is not None else np.zeros(len(ranking.ids))
    engine = np.where(assessed, ranking.engine, -np.inf)
    assert len(set(ranking.blended[assessed])) < assessed.sum() / 2  # ties there are

    def sorted_place(values: np.ndarray, i: int) -> int:
        among = assessed & ranking.undecided if ranking.undecided[i] else assessed
        order = sorted(
            np.flatnonzero(among), key=lambda j: queue_key(values[j], int(days[j]), ranking.ids[j])
        )
        return order.index(i) + 1

    for i in np.flatnonzero(assessed):
        explanation = ranking.explain(ranking.ids[i])
        assert explanation is not None
        assert (explanation.place, explanation.engine_place) == (
            sorted_place(ranking.blended, i),
            sorted_place(engine, i),
        )
    in_full = sorted(
        np.flatnonzero(assessed), key=lambda j: queue_key(ranking.blended[j], int(days[j]), ranking.ids[j])
    )
    assert ranking.relevance_order()[: len(in_full)] == [ranking.ids[j] for j in in_full]


def test_the_queues_summary_is_the_ranking_asked_paper_by_paper(decided: Path) -> None:
    ranking = store_ranking(Store.open(load_settings()), with_estimate=True).ranking
    ids = [*ranking.ids, "arxiv:0000.00000"]  # and a paper the ranking has not seen
    summary = RankSummary.of(ranking, ids)
    kept = pickle.loads(pickle.dumps(summary))  # as the next command reads it
    for answer in (summary, kept):
        for pid in ids:
            assert answer.key(pid, None) == ranking.key(pid, None)
            assert answer.score(pid) == ranking.score(pid)
            assert answer.uncertain(pid) == ranking.uncertain(pid)
            assert answer.disagreement(pid) == ranking.disagreement(pid)
    # The whole queue's keys at once, and a part of it, as paper by paper (an unranked paper
    # sorts by its relevance).
    entries = [(pid, "new", 5.0, None) for pid in ids]
    assert kept.keys_of(entries) == [kept.key(pid, 5.0) for pid in ids]
    assert kept.keys_of(entries[::2]) == [kept.key(pid, 5.0) for pid in ids[::2]]
    assert kept.keys_of(entries)[-1] != -math.inf


def test_show_and_ranked_after_a_write_print_what_they_print_from_every_paper(decided: Path) -> None:
    """After a decision, an import and an agenda edit, `show` and `ranked` with the state kept
    from the command before print what they print once the kept rows and answers are gone
    (every paper read again)."""
    home = decided.parent / "home"

    def both(*args: str) -> tuple[str, str]:
        with_kept = run(*args).output
        personal = personal_cache(home)
        for name in ("rows.pickle", "rows.delta.pickle", "topics.pickle"):
            for path in personal.rglob(name):
                path.unlink()
        shutil.rmtree(home / ".cache" / "triage" / "answers", ignore_errors=True)
        return with_kept, run(*args).output

    def import_one() -> None:
        store = Store.open(load_settings())
        store.upsert_papers([Paper.create(title="Interpreting attention heads", abstract="Probing words.")])
        tag_offline(store, load_agenda(decided / "agenda.md"))

    top = [
        json.loads(line)["paper"]["id"] for line in run("ranked", "--top", "5", "--json").output.splitlines()
    ]
    for write in (
        lambda: run("mark", top[0], "--accept"),
        lambda: run("mark", top[1], "--reject"),
        import_one,
        lambda: (decided / "agenda.md").write_text(
            (decided / "agenda.md").read_text(encoding="utf-8") + "\nAlso of interest: evaluation.\n",
            encoding="utf-8",
        ),
    ):
        run("ranked", "--top", "5")  # the state kept from a command before the write
        write()
        for args in (("show", top[2]), ("ranked", "--top", "10"), ("ranked", "--all", "--json")):
            with_kept, from_every_paper = both(*args)
            assert with_kept == from_every_paper, args
