"""The review UI driven as a user would (Textual's Pilot), against a real store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, OptionList, Static, TextArea
from tui_support import (
    agenda,
    copy_store,
    detail_text,
    drive,
    fill,
    make_app,
    ranked_ids,
    reopen,
    settle,
    slow_store,
    template,
)

from assistant.config import Settings, load_settings
from assistant.errors import StoreError
from assistant.index import Sort, sort_key
from assistant.lists import ReadingLists
from assistant.models import Paper, Status
from assistant.store import Store
from assistant.tui.app import ReviewApp
from assistant.tui.screens import ErrorScreen, FilterScreen, HelpScreen, ListsScreen, NoteScreen


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tui-stores")
    template(root, assess=True)
    template(root, assess=False)
    return root


@pytest.fixture
def assessed(templates: Path, tmp_path: Path) -> Settings:
    return copy_store(templates / "assessed", tmp_path / "store")


@pytest.fixture
def unassessed(templates: Path, tmp_path: Path) -> Settings:
    return copy_store(templates / "raw", tmp_path / "store")


def test_queue_is_ranked_and_the_detail_shows_the_assessment(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)
    expected = ranked_ids(reopen(assessed))

    async def script(pilot: Pilot[None]) -> None:
        assert app.shown == expected
        table = app.query_one(DataTable)
        assert table.row_count == len(expected)
        detail = detail_text(app)
        item = reopen(assessed).get(expected[0])
        assert item is not None and item.assessment is not None
        assert item.paper.title[:30] in detail
        assert "summary" in detail and "engine" in detail
        for topic in item.assessment.topics:
            assert topic.topic in detail
        await pilot.press("j")
        assert app.current_id() == expected[1]

    drive(app, script)


def test_decisions_advance_to_the_next_undecided_and_are_written_at_once(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)
    ids = ranked_ids(reopen(assessed))
    # The engine's order throughout: a re-ranking landing between two keys would move the rows
    # this test counts on (following the new order is tested below).
    app.schedule_retrain = lambda: None  # type: ignore[method-assign]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.pause(0.4)  # the view's count runs once the screen is drawn
        await settle(pilot)
        assert app.matching == 30
        await pilot.press("a")
        assert app.current_id() == ids[1]
        summary = str(app.query_one("#summary", Static).content)
        assert "accepted 1" in summary and ": 29" in summary  # the header counts at once
        await pilot.press("x", "m", "s")
        assert app.current_id() == ids[4]
        store = reopen(assessed)
        assert [store.get(i).decision.status for i in ids[:3]] == [  # type: ignore[union-attr]
            Status.ACCEPTED,
            Status.REJECTED,
            Status.MAYBE,
        ]
        assert store.get(ids[3]).decision.starred  # type: ignore[union-attr]
        # Going back up and accepting skips the decided papers: the next undecided is ids[4].
        await pilot.press("k", "k")
        assert app.current_id() == ids[2]
        await pilot.press("a")
        assert app.current_id() == ids[3]  # starred but still undecided
        await pilot.press("u")
        assert reopen(assessed).get(ids[2]).decision.status is Status.MAYBE  # type: ignore[union-attr]
        assert app.current_id() == ids[2]
        await pilot.press("u", "u", "u", "u")
        assert app.matching == 30  # every paper is undecided again, and counted
        store = reopen(assessed)
        assert all(store.get(i).decision.status is Status.NEW for i in ids[:4])  # type: ignore[union-attr]
        assert not store.get(ids[3]).decision.starred  # type: ignore[union-attr]

    drive(app, script)


def test_tags_note_and_lists_from_the_keyboard(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)
    first = ranked_ids(reopen(assessed))[0]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("t")
        tags = app.screen.query_one(Input)
        tags.value = "to-read, Causal"
        await pilot.press("enter")
        await pilot.press("n")
        app.screen.query_one(TextArea).text = "Compare with our probing results."
        await pilot.press("ctrl+s")
        await pilot.press("l")
        assert isinstance(app.screen, ListsScreen)
        app.screen.query_one(Input).focus()
        await pilot.press(*"Group meeting", "enter")
        await pilot.pause()
        item = reopen(assessed).get(first)
        assert item is not None
        assert item.decision.tags == ["to-read", "causal"]
        assert item.decision.note == "Compare with our probing results."
        assert item.decision.lists == ["Group meeting"]
        assert ReadingLists(reopen(assessed)).members("Group meeting") == [first]
        detail = detail_text(app)
        assert "to-read" in detail and "Group meeting" in detail and "probing" in detail
        # The picker shows the membership; choosing the list again takes the paper out.
        await pilot.press("l")
        options = app.screen.query_one(OptionList)
        assert "✓ Group meeting" in str(options.get_option_at_index(0).prompt)
        options.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert reopen(assessed).get(first).decision.lists == []  # type: ignore[union-attr]
        assert ReadingLists(reopen(assessed)).exists("Group meeting")

    drive(app, script)


def test_tag_completion_offers_the_store_vocabulary(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        word = app.index.vocabulary()[0]
        await pilot.press("t")
        await pilot.press(*word[:3])
        await pilot.pause(0.2)
        await pilot.press("right")
        assert app.screen.query_one(Input).value.endswith(word)

    drive(app, script)


def test_views_filters_and_sorts_combine(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a", "a", "x")
        await pilot.press("v")  # new only
        assert app.view_name == "new"
        assert all(app.index.rows[i].status is Status.NEW for i in app.shown)
        await pilot.press("v")  # accepted
        assert len(app.shown) == 2
        await pilot.press("f")
        assert isinstance(app.screen, FilterScreen)
        app.screen.query_one("#min_score", Input).value = "6"
        app.screen.query_one("#statuses").deselect_all()  # type: ignore[attr-defined]
        await pilot.click("#apply")
        await settle(pilot)
        assert app.shown and all((app.index.rows[i].relevance or 0) >= 6 for i in app.shown)
        assert len(app.shown) == sum(1 for r in app.index.rows.values() if (r.relevance or 0) >= 6)
        await pilot.pause(0.4)  # the view is counted in the background once the screen is drawn
        await settle(pilot)
        assert app.matching == len(app.shown)
        await pilot.press("f")
        app.screen.query_one("#min_score", Input).value = "eleven"
        await pilot.click("#apply")
        assert isinstance(app.screen, FilterScreen)  # a bad value is explained, not applied
        assert "number" in str(app.screen.query_one("#problem", Static).content)
        await pilot.press("escape")
        await pilot.press("S")
        assert app.sort is Sort.NEWEST
        days = [app.index.rows[i].day or 0 for i in app.shown]
        assert days == sorted(days, reverse=True)

    drive(app, script)


def test_search_by_words_and_meaning_and_more_like_this(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await pilot.press(*"multilingual")
        app.screen.query_one("#semantic").value = False  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(pilot)
        assert app.shown and all("multilingual" in app.index.rows[i].text for i in app.shown)
        await pilot.press("escape")
        assert len(app.shown) == len(app.index.rows)
        await pilot.press("slash")
        await pilot.press(*"speech recognition for African languages", "enter")
        await settle(pilot)
        top = app.index.rows[app.shown[0]].title.lower()
        assert "african" in top or "multilingual" in top
        assert "nearest to" in app.view_label()
        current = app.current_id()
        await pilot.press("M")
        assert current not in app.shown and len(app.shown) >= 10
        assert "more like" in app.view_label()

    drive(app, script)


def test_open_link_uses_the_browser(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **kw: opened.append(url) or True)
    paper = Paper.create(title="Attention heads that copy", arxiv_id="arXiv:2401.01234v2")
    reopen(assessed).upsert_papers([paper])
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        app.table.move_cursor(row=app.shown.index(paper.id))
        await pilot.press("o")
        assert opened == ["https://arxiv.org/abs/2401.01234"]
        app.table.move_cursor(row=0)
        await pilot.press("o")
        assert len(opened) == 1  # no link: a notice, nothing opened
        # No browser on this machine (an SSH session): the link is shown, not "opened".
        monkeypatch.setattr("webbrowser.open", lambda url, *a, **kw: False)
        app.table.move_cursor(row=app.shown.index(paper.id))
        await pilot.press("o")
        await pilot.pause()
        notices = [n.message for n in app._notifications]
        assert any("No browser found" in m and "2401.01234" in m for m in notices)

    drive(app, script)


def test_help_lists_every_binding(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(d for _, d in app.screen.rows)
        for action in ("Accept", "Reject", "Undo", "More like this", "Assess this paper", "Sort"):
            assert action in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(app, script)


def test_assess_runs_in_the_background_and_updates_the_queue(unassessed: Settings, tmp_path: Path) -> None:
    app = make_app(unassessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        assert all(app.index.rows[i].relevance is None for i in app.shown)
        first = app.current_id()
        assert first is not None
        await pilot.press("e")
        await settle(pilot)
        item = reopen(unassessed).get(first)
        assert item is not None and item.assessment is not None
        assert app.index.rows[first].relevance == item.assessment.relevance
        assert "Assessed 1" in str(app.query_one("#status-line", Static).content)
        await pilot.press("E")
        await settle(pilot)
        assert all(i.assessment for i in reopen(unassessed).iter_all())

    drive(app, script)


def test_store_errors_show_in_a_modal_and_the_ui_goes_on(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(assessed, tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise StoreError("cannot reach the Chroma server at http://127.0.0.1:9: connection refused")

    async def script(pilot: Pilot[None]) -> None:
        monkeypatch.setattr(app.store, "set_decision_fields", broken)
        await pilot.press("a")
        assert isinstance(app.screen, ErrorScreen)
        assert "connection refused" in app.screen.message
        await pilot.press("escape")
        monkeypatch.undo()
        await pilot.press("a")
        assert not isinstance(app.screen, ErrorScreen)
        assert reopen(assessed).get(app.shown[0]).decision.status is Status.ACCEPTED  # type: ignore[union-attr]

    drive(app, script)


def test_the_queue_cache_makes_the_next_opening_skip_the_scan(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a")

    drive(app, script)
    again = make_app(assessed, tmp_path)
    first = ranked_ids(reopen(assessed), tuple(Status))[0]
    # The first screen comes from the rows the last session kept apart, the decision in them.
    assert again.index.head_stamp and not again.index.built
    assert first not in again.index.rows and list(again.index.rows) == ranked_ids(reopen(assessed))[:30]

    async def reopened(pilot: Pilot[None]) -> None:
        assert again.index.built and len(again.index.rows) == 30
        assert again.index.rows[first].status is Status.ACCEPTED

    drive(again, reopened)


def test_the_first_screen_from_the_rows_kept_apart_becomes_the_whole_queue_after_a_write_elsewhere(
    assessed: Settings, tmp_path: Path
) -> None:
    """A session paints its first screen from what the last one kept apart, then reads the
    whole index and what another client wrote since: the queue and its count are the store's."""
    app = make_app(assessed, tmp_path)

    async def decide(pilot: Pilot[None]) -> None:
        await pilot.press("a")

    drive(app, decide)
    kept = ranked_ids(reopen(assessed))
    reopen(assessed).set_status([kept[1]], Status.REJECTED)  # another client, after it closed
    again = make_app(assessed, tmp_path)
    assert list(again.index.rows) == kept and not again.index.built

    async def reopened(pilot: Pilot[None]) -> None:
        await pilot.pause(0.4)  # the view's count
        await settle(pilot)
        from assistant.personal import store_ranking

        # In the order `triage ranked` gives (the two decisions already blend).
        undecided = set(ranked_ids(reopen(assessed)))
        command = store_ranking(reopen(assessed), cache_dir=tmp_path / "elsewhere").ranking
        expected = [pid for pid in command.relevance_order() if pid in undecided]
        assert again.index.built and again.shown == expected and kept[1] not in again.shown
        assert again.matching == len(expected) == 28
        counts = again.index.counts()
        assert (counts[Status.ACCEPTED], counts[Status.REJECTED], counts[Status.NEW]) == (1, 1, 28)

    drive(again, reopened)


def test_the_queue_is_read_a_page_at_a_time_as_the_cursor_moves(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import assistant.tui.app as tui_app
    import assistant.tui.widgets as tui_widgets

    monkeypatch.setattr(tui_widgets, "PAGE", 8)
    monkeypatch.setattr(tui_app, "PREFETCH", 3)
    app = make_app(assessed, tmp_path)
    expected = ranked_ids(reopen(assessed))

    async def script(pilot: Pilot[None]) -> None:
        assert app.shown == expected[:8]
        await pilot.press(*["j"] * 5)
        assert app.shown == expected[:16]  # the next page arrived before the cursor reached the end
        await pilot.press(*["j"] * 30)
        assert app.shown == expected and app.current_id() == expected[-1]

    drive(app, script)


def test_undo_after_a_refresh_brings_the_paper_back_and_fixes_the_counts(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)
    first = ranked_ids(reopen(assessed))[0]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("x", "r")
        await settle(pilot)
        assert first not in app.shown  # rejected papers leave the undecided view on refresh
        await pilot.press("u")
        assert app.current_id() == first
        assert reopen(assessed).get(first).decision.status is Status.NEW  # type: ignore[union-attr]
        summary = str(app.query_one("#summary", Static).content)
        assert "rejected 0" in summary and "new 30" in summary

    drive(app, script)


def test_an_edited_agenda_is_taken_in_and_marks_old_assessments_stale(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)
    first = ranked_ids(reopen(assessed))[0]

    async def script(pilot: Pilot[None]) -> None:
        assert "stale" not in detail_text(app)
        assessed.agenda_path.write_text("## Speech recognition\n\nAcoustic models.\n", encoding="utf-8")
        await pilot.press("r")
        await settle(pilot)
        assert app.agenda is not None and app.agenda.topics[0].name == "Speech recognition"
        assert "stale" in detail_text(app)
        await pilot.press("e")
        await settle(pilot)
        item = reopen(assessed).get(first)
        assert item is not None and item.assessment is not None
        assert [t.topic for t in item.assessment.topics] == ["Speech recognition"]
        assert "stale" not in detail_text(app)

    drive(app, script)


def test_narrow_terminals_show_the_detail_on_enter_and_keys_move_to_the_ends(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)
    expected = ranked_ids(reopen(assessed))

    async def script(pilot: Pilot[None]) -> None:
        assert app.query_one("#detail-pane").display
        await pilot.resize_terminal(90, 30)
        await settle(pilot)
        assert app.query_one("#detail-pane").display is False and app.table.display
        await pilot.press("enter")
        assert app.query_one("#detail-pane").display and not app.table.display
        await pilot.press("enter")
        assert app.table.display
        await pilot.press("end")
        assert app.current_id() == expected[-1]
        await pilot.press("g")
        assert app.current_id() == expected[0]

    drive(app, script)


def test_word_search_finds_every_author_and_the_detail_follows_outside_writes(
    assessed: Settings, tmp_path: Path
) -> None:
    store = reopen(assessed)
    items = [i for i in store.iter_all() if len(i.paper.authors) >= 3]
    coauthor = items[0].paper.authors[-1]
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await pilot.press(*coauthor)
        app.screen.query_one("#semantic").value = False  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(pilot)
        assert items[0].paper.id in app.shown
        # Another process writes a note on the highlighted paper: the detail pane shows it.
        current = app.current_id()
        assert current is not None
        reopen(assessed).update_decision(current, note="Written from the shell.")
        await pilot.press("r")
        await settle(pilot)
        assert "Written from the shell." in detail_text(app)

    drive(app, script)


def test_escape_in_the_note_editor_asks_before_discarding(assessed: Settings, tmp_path: Path) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        pid = app.current_id()
        await pilot.press("n")
        app.screen.query_one(TextArea).text = "half a thought"
        await pilot.press("escape")
        assert isinstance(app.screen, NoteScreen)  # still open, with a warning
        await pilot.press("escape")
        assert not isinstance(app.screen, NoteScreen)
        assert reopen(assessed).get(pid).decision.note == ""  # type: ignore[arg-type, union-attr]

    drive(app, script)


def test_a_decision_writes_only_its_fields_so_outside_changes_survive(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)
    first = ranked_ids(reopen(assessed))[0]

    async def script(pilot: Pilot[None]) -> None:
        # Another process files the highlighted paper into a list and writes a note...
        outside = reopen(assessed)
        ReadingLists(outside).create("read")
        ReadingLists(outside).add("read", [first])
        outside.update_decision(first, note="From the shell.")
        # ...and the UI, which read the paper before, accepts it, then undoes that.
        await pilot.press("a")
        item = reopen(assessed).get(first)
        assert item is not None and item.decision.status is Status.ACCEPTED
        assert item.decision.lists == ["read"] and item.decision.note == "From the shell."
        await pilot.press("u")
        item = reopen(assessed).get(first)
        assert item is not None and item.decision.status is Status.NEW
        assert item.decision.lists == ["read"] and item.decision.note == "From the shell."

    drive(app, script)


def test_each_store_has_its_own_queue_cache(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two projects whose stores sit at the same relative path (./store) do not share a queue."""
    cache = tmp_path / "cache"
    copy_store(templates / "assessed", tmp_path / "a" / "store")
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = load_settings(store=Path("store"))
    app = ReviewApp(Store.open(first), first, agenda(), cache_dir=cache, refresh_every=60)
    drive(app, lambda pilot: pilot.pause())
    assert len(app.index.rows) == 30
    monkeypatch.chdir(tmp_path / "b")
    other = load_settings(store=Path("store"))
    Store.open(other).upsert_papers([Paper.create(title="The only paper of project b")])
    again = ReviewApp(Store.open(other), other, agenda(), cache_dir=cache, refresh_every=60)

    async def script(pilot: Pilot[None]) -> None:
        assert len(again.index.rows) == 1 and len(again.shown) == 1

    drive(again, script)


def about_knowledge(assessed: Settings) -> set[str]:
    """The papers a researcher interested in knowledge in models would accept."""
    return {
        i.paper.id
        for i in reopen(assessed).iter_all()
        if "knowledge" in i.paper.document.lower() or "fact" in i.paper.document.lower()
    }


async def decide_in_a_row(pilot: Pilot[None], app: ReviewApp, wanted: set[str], n: int) -> None:
    """Accept the wanted papers and reject the others, `n` decisions from the cursor down, with
    no retrain meanwhile (the caller schedules the one that follows)."""
    app.schedule_retrain = lambda: None  # type: ignore[method-assign]
    for _ in range(n):
        pid = app.current_id()
        assert pid is not None
        await pilot.press("a" if pid in wanted else "x")
    del app.schedule_retrain


def test_decisions_retrain_the_personal_model_and_the_queue_follows(
    assessed: Settings, tmp_path: Path
) -> None:
    """Accept the papers of one kind and reject the rest: after the retrain (in a worker), the
    header says what was learned, the queue's order is the blend, the detail pane explains."""
    app = make_app(assessed, tmp_path)
    wanted = about_knowledge(assessed)

    async def script(pilot: Pilot[None]) -> None:
        summary = app.query_one("#summary", Static)
        assert "learns from your first accept" in str(summary.content)
        # The same 14 papers every run: no re-ranking while they are decided (one landing
        # between two keys would lead the cursor to other papers), then one retrain.
        await decide_in_a_row(pilot, app, wanted, 14)
        app.schedule_retrain()
        await settle(pilot)
        assert app.ranking is not None and app.ranking.fit.decided == 14
        if not app.ranking.personal:
            pytest.skip(f"the sample's top 14 taught nothing: {app.ranking.fit.note}")
        assert "learned from 14" in str(summary.content)
        key = sort_key(Sort.RELEVANCE, app.ranking)
        keys = [key(app.index.rows[i]) for i in app.shown if i not in app.sticky]
        assert keys == sorted(keys)
        assert "your decisions" in detail_text(app)
        # The view that teaches fastest: undecided papers, least certain first.
        app.set_sort(Sort.UNCERTAIN)
        await settle(pilot)
        shown = [i for i in app.shown if i not in app.sticky]
        assert all(app.index.rows[i].status is not Status.ACCEPTED for i in shown)
        values = [app.ranking.uncertain(i) for i in shown if app.index.rows[i].status is Status.NEW]
        assert values == sorted(values)
        # Disagreements first, each saying which way the model leans.
        status = list(app.table.widths).index("status")

        def marks() -> dict[str, str]:
            cells = {i: str(app.table.get_row(i)[status]) for i in app.table.shown}
            return {i: c[-1] for i, c in cells.items() if c[-1] in "↑↓"}

        app.set_sort(Sort.DISAGREEMENT)
        await settle(pilot)
        new = [i for i in app.table.shown if app.index.rows[i].status is Status.NEW]
        leans = {i: "↑" if app.ranking.disagreement(i) > 0 else "↓" for i in new}
        assert new and {i: marks()[i] for i in new} == leans
        assert set(leans.values()) == {"↑", "↓"}
        app.set_sort(Sort.RELEVANCE)
        await settle(pilot)
        assert not marks()

    drive(app, script)


def test_the_personal_model_reads_texts_for_other_writers_papers_not_for_each_decision(
    assessed: Settings, tmp_path: Path
) -> None:
    """Deciding retrains the model without reading any paper's text again (on a lab's server
    that was three requests per decision); a paper another process adds is read in and ranked."""
    app = make_app(assessed, tmp_path, refresh=0.3)
    reads: list[tuple[str, list[str]]] = []

    def spied(name: str) -> None:
        real = getattr(app.store, name)

        def read(ids: Any) -> Any:
            reads.append((name, list(ids)))
            return real(ids)

        setattr(app.store, name, read)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        assert app.texts is not None and app.ranking is not None
        spied("documents")
        spied("texts")
        for key in "axax":
            await pilot.press(key)
            await pilot.pause(0.4)  # the refresh runs meanwhile, and reads the decisions back
        app.schedule_retrain()
        await settle(pilot)
        await pilot.pause(1.0)
        await settle(pilot)
        assert app.ranking.fit.decided == 4
        assert reads == []
        paper = Paper.create(
            title="Retrieval-augmented generation for citation screening",
            abstract="We retrieve passages before generating an answer to a screening question.",
            authors=["A. Writer"],
            sources=["elsewhere"],
        )
        reopen(assessed).upsert_papers([paper])
        for _ in range(60):
            await pilot.pause(0.2)
            if paper.id in app.texts.position and paper.id in app.ranking.relevance_order():
                break
        await settle(pilot)
        assert paper.id in app.texts.position
        assert paper.id in app.ranking.relevance_order()
        assert ("texts", [paper.id]) in reads
        assert all(ids == [paper.id] for name, ids in reads if name == "texts")
        # Another process adds a paper without an abstract, then finds its abstract (its queue
        # row stays the same): the model reads the new text.
        from assistant.personal.features import _digest

        bare = Paper.create(title="Sparse routing for mixture of experts", authors=["B. Writer"])
        reopen(assessed).upsert_papers([bare])
        for _ in range(60):
            await pilot.pause(0.2)
            if bare.id in app.texts.position:
                break
        assert bare.id in app.texts.position
        found = bare.model_copy(update={"abstract": "Tokens are routed to a few experts of many."})
        other = reopen(assessed)
        other.upsert_papers([found])
        document = other.documents([bare.id])[bare.id]
        assert document != bare.document
        app.texts_every = 0.0  # (a lab's UI reads papers written again at most twice a minute)
        await pilot.pause(1.0)  # a refresh brings the paper
        app.schedule_retrain()
        await settle(pilot)
        assert app.texts._known_digest(bare.id) == _digest(document)

    drive(app, script)


def test_the_cursor_opens_on_the_top_of_the_blended_queue(assessed: Settings, tmp_path: Path) -> None:
    """Decisions made before the UI opens: once the model is ready the queue is re-ordered, and
    a cursor left on the first row moves with it to the blend's top (pressing `a` at once must
    accept the paper the queue puts first, not the engine's first)."""
    store = reopen(assessed)
    items = sorted(
        (i for i in store.iter_all() if i.assessment),
        key=lambda i: -(i.assessment.relevance if i.assessment else 0),
    )
    wanted = [
        i.paper.id
        for i in items
        if "knowledge" in i.paper.document.lower() or "fact" in i.paper.document.lower()
    ]
    for item in items[:14]:
        store.set_status([item.paper.id], Status.ACCEPTED if item.paper.id in wanted else Status.REJECTED)
    store.set_status(
        [pid for pid in wanted if pid not in {i.paper.id for i in items[:14]}][:4], Status.ACCEPTED
    )
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        if app.ranking is None or not app.ranking.personal:
            pytest.skip("these decisions taught the model nothing")
        assert app.table.cursor_row == 0
        assert app.current_id() == app.shown[0]
        key = sort_key(Sort.RELEVANCE, app.ranking)
        best = min((r for r in app.index.rows.values() if r.status is Status.NEW), key=key)
        assert app.current_id() == best.id

    drive(app, script)


def test_the_disagreement_marks_come_with_the_first_ranking(assessed: Settings, tmp_path: Path) -> None:
    """Opened in the disagreement sort before the model is ready: the rows are redrawn in the
    model's order, each marked with the way the model leans, once it has trained."""
    store = reopen(assessed)
    items = sorted((i for i in store.iter_all() if i.assessment), key=lambda i: i.paper.id)
    for n, item in enumerate(items[:12]):
        store.set_status([item.paper.id], Status.ACCEPTED if n % 3 else Status.REJECTED)
    app = make_app(assessed, tmp_path)
    app.sort = Sort.DISAGREEMENT

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        assert app.ranking is not None and app.ranking.model is not None
        status = list(app.table.widths).index("status")
        new = [i for i in app.table.shown if app.index.rows[i].status is Status.NEW]
        cells = {i: str(app.table.get_row(i)[status])[-1] for i in new}
        assert new and cells == {i: "↑" if app.ranking.disagreement(i) > 0 else "↓" for i in new}
        key = sort_key(Sort.DISAGREEMENT, app.ranking)
        keys = [key(app.index.rows[i]) for i in app.shown if i not in app.sticky]
        assert keys == sorted(keys)

    drive(app, script)


def test_after_a_decision_the_cursor_lands_on_the_best_undecided_paper_of_the_new_order(
    assessed: Settings, tmp_path: Path
) -> None:
    """The queue re-ranks after each decision: the cursor a decision moved down never skips
    undecided papers the new order put above it; the rows and the detail pane say which score
    they show, and the detail pane shows both the blend and the engine's."""
    app = make_app(assessed, tmp_path)
    wanted = about_knowledge(assessed)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        assert app.table.score_label == "relevance"
        moved = 0
        for _ in range(12):
            pid = app.current_id()
            assert pid is not None
            await pilot.press("a" if pid in wanted else "x")
            await settle(pilot)
            assert app.ranking is not None
            # No undecided paper above the cursor: it is on the best one of the queue's order.
            above = [i for i in app.shown[: app.table.cursor_row] if app.index.rows[i].status is Status.NEW]
            assert not above, above
            line = str(app.query_one("#status-line", Static).content)
            moved += line.startswith("Re-ranked after your decision")
        assert app.ranking.personal
        key = sort_key(Sort.RELEVANCE, app.ranking)
        best = min((r for r in app.index.rows.values() if r.status is Status.NEW), key=key)
        assert app.current_id() == best.id
        assert app.table.score_label == "blend" and "blend" in str(app.table.columns["rel"].label)
        detail = detail_text(app)
        assert "blend" in detail and "engine" in detail and "the queue's order" in detail
        assert moved, "no decision re-ordered the papers below the cursor: nothing was tested"

    drive(app, script)


def test_a_new_ranking_waits_for_the_keys_to_pause(assessed: Settings, tmp_path: Path) -> None:
    """The model retrains after decisions while the researcher moves on: the ranking it makes
    does not re-sort the queue under the cursor (nor keep a key waiting on the re-sort) while
    keys come; once they pause, it does."""
    app = make_app(assessed, tmp_path)
    app.resort_after_keys = 1.5  # longer than any gap between keys here (0.4 s as shipped)
    wanted = about_knowledge(assessed)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await decide_in_a_row(pilot, app, wanted, 10)
        before, order = app.ranking, list(app.shown)
        app.schedule_retrain()
        moves = 0
        while app._held_ranking is None:  # until the retrain is done (and held)
            await pilot.press("j" if moves % 2 == 0 else "k")
            await pilot.pause(0.1)
            moves += 1
            assert moves < 100, "the retrain never finished"
        for n in range(4):
            await pilot.press("j" if n % 2 == 0 else "k")
            await pilot.pause(0.1)
            assert app.ranking is before and app.shown == order
        await settle(pilot)
        assert app.ranking is not before and app.ranking is not None
        assert app.ranking.fit.decided == 10

    drive(app, script)


def test_the_garbage_collector_runs_between_keys_not_in_them(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python's collector fell inside keys (at 100k papers up to 15 ms of a re-sort's ~50): it
    runs once the keys pause, none while they come, and is back on when the UI closes."""
    import gc

    from assistant.tui import collector

    monkeypatch.setattr(collector, "IDLE", 1.0)  # longer than any gap between keys here
    app = make_app(assessed, tmp_path)
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        assert not gc.isenabled()
        gc.callbacks.append(seen)
        try:
            garbage = [[] for _ in range(5000)]  # far past the young generation's threshold
            for n in range(8):
                await pilot.press("j" if n % 2 == 0 else "k")
                await pilot.pause(0.05)
            assert collections == [], "a collection ran while keys came"
            await pilot.pause(1.4)
            assert collections, "nothing was collected once the keys paused"
            assert gc.get_count()[0] < len(garbage)
        finally:
            gc.callbacks.remove(seen)

    drive(app, script)
    assert gc.isenabled()


def test_a_decision_does_not_wait_on_the_store_and_its_write_lands_in_order(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store slow to write (a lab's server busy with everyone's work; here each decision's
    write takes 2 s): the key moves on at once; the decided row and its detail say so while
    the write is under way, and a refresh meanwhile does not bring the paper back as it was; an
    undo pressed at once lands after the decision it undoes; a quit waits for the writes."""
    import time

    slow = 2.0  # (1 s was sometimes over before the checks on a machine busy with other tests)
    slow_store(monkeypatch, slow, "set_decision_fields")
    app = make_app(assessed, tmp_path, refresh=0.2)
    decided: dict[str, Status] = {}

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        first = app.current_id()
        assert first is not None
        started = time.perf_counter()
        await pilot.press("a")
        assert time.perf_counter() - started < 0.8 * slow, "the key waited on the write"
        assert app.current_id() != first
        await pilot.press("k")
        await pilot.pause(0.6)  # refreshes read the store, where the paper is still undecided
        assert app.current_id() == first
        assert app.index.rows[first].status is Status.ACCEPTED
        assert "accepted" in detail_text(app)
        assert reopen(assessed).get(first).decision.status is Status.NEW  # type: ignore[union-attr]
        await pilot.press("x")  # rejected instead, and at once undone: back to accepted
        await pilot.press("u")
        decided[first] = Status.ACCEPTED
        await settle(pilot)
        assert app.index.rows[first].status is Status.ACCEPTED
        await pilot.press("j")
        last = app.current_id()
        assert last is not None and last != first
        await pilot.press("m")
        decided[last] = Status.MAYBE
        await pilot.press("q")  # while the maybe is being written

    drive(app, script)
    store = reopen(assessed)
    assert {pid: store.get(pid).decision.status for pid in decided} == decided  # type: ignore[union-attr]


def test_a_decision_still_being_written_when_the_session_dies_is_written_by_the_next(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a decision's write is under way (here one held until the test lets it go) the
    change is on disk beside the recovery files: a session killed then loses nothing, as the
    next session of the store writes it (`recovery.replay`, what `triage review` runs first).
    Once the writes land the file is gone."""
    import subprocess
    import threading

    from assistant.tui import recovery

    held = threading.Event()
    write = Store.set_decision_fields

    def stuck(store: Store, *args: Any, **kwargs: Any) -> None:
        if store is app.store:  # the UI's writes, not the next session's
            held.wait(30)
        write(store, *args, **kwargs)

    monkeypatch.setattr(Store, "set_decision_fields", stuck)
    app = make_app(assessed, tmp_path)
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        pid = app.current_id()
        await pilot.press("x")
        journals = list(recovery.folder().glob(f"*-writing-*{recovery.SUFFIX}"))
        assert len(journals) == 1
        # A running session's journal is its own to write: another session's replay leaves it.
        assert recovery.replay(reopen(assessed), recovery.folder()).saved == []
        # What the next session does first, as if this one had been killed here (its process
        # gone: the journal named after one that has ended).
        gone = subprocess.Popen(["true"])
        gone.wait()
        journals[0].rename(journals[0].with_name(f"19990101-000000-writing-{gone.pid}{recovery.SUFFIX}"))
        done = recovery.replay(reopen(assessed), recovery.folder())
        seen["replayed"], seen["pid"] = done.saved, pid
        held.set()
        await settle(pilot)
        assert not list(recovery.folder().glob(f"*-writing-*{recovery.SUFFIX}"))

    drive(app, script)
    assert seen["replayed"] == [seen["pid"]]
    assert reopen(assessed).get(seen["pid"]).decision.status is Status.REJECTED  # type: ignore[union-attr]


def test_two_keys_in_one_burst_neither_hang_the_ui_nor_land_out_of_order(
    assessed: Settings, tmp_path: Path
) -> None:
    """A terminal delivers keys in bursts: a decision and its undo (and a decision and `q`) read
    together must not leave the undo waiting for a writer that never started (the UI hung)."""
    import faulthandler
    import sys

    from textual import events

    app = make_app(assessed, tmp_path)
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        seen["first"] = app.current_id()
        # A hang fails the run rather than stall it.
        faulthandler.dump_traceback_later(60, exit=True, file=sys.__stderr__)
        try:
            for key in ("x", "u"):
                app.post_message(events.Key(key, key))
            await pilot.pause(0.3)
            await settle(pilot)
            assert app.index.rows[seen["first"]].status is Status.NEW
            await pilot.press("j")  # off the paper the undo brought the cursor back to
            seen["second"] = app.current_id()
            assert seen["second"] != seen["first"]
            for key in ("a", "q"):
                app.post_message(events.Key(key, key))
            await pilot.pause(0.3)
        finally:
            faulthandler.cancel_dump_traceback_later()

    drive(app, script)
    store = reopen(assessed)
    assert store.get(seen["first"]).decision.status is Status.NEW  # type: ignore[union-attr]
    assert store.get(seen["second"]).decision.status is Status.ACCEPTED  # type: ignore[union-attr]


def test_a_change_made_while_the_last_is_being_written_starts_from_it(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that take 0.6 s: tags edited twice in a row (the second dialog shows the first
    edit), and a paper accepted, deleted and brought back with `u`, come back accepted."""
    slow_store(monkeypatch, 0.6, "set_decision_fields")
    app = make_app(assessed, tmp_path)
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        pid = seen["pid"] = app.current_id()
        await pilot.press("t")
        app.screen.query_one(Input).value = "first-tag"
        await pilot.press("enter")
        await pilot.press("t")  # at once, while the first edit is being written
        shown = app.screen.query_one(Input).value
        assert "first-tag" in shown, shown
        app.screen.query_one(Input).value = shown.rstrip(", ") + ", second-tag"
        await pilot.press("enter")
        await pilot.press("a")
        await pilot.press("k")
        assert app.current_id() == pid
        await pilot.press("D")
        await pilot.press("y")
        await pilot.press("u")
        await settle(pilot)

    drive(app, script)
    item = reopen(assessed).get(seen["pid"])
    assert item is not None and item.decision.status is Status.ACCEPTED
    assert {"first-tag", "second-tag"} <= set(item.decision.tags)


def test_an_empty_store_says_how_to_fill_it(tmp_path: Path) -> None:
    from assistant.config import load_settings

    app = make_app(load_settings(store=tmp_path / "empty"), tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        line = str(app.query_one("#status-line", Static).content)
        assert "The store is empty" in line and "triage ingest FILE" in line

    drive(app, script)


def test_assessing_the_view_with_an_llm_asks_first_with_the_count_and_cost(
    unassessed: Settings, tmp_path: Path
) -> None:
    """`E` used to start LLM calls at once, for the rows loaded so far: it now plans the whole
    view, says how many papers, calls and tokens and what it costs, and waits for a yes."""
    from fake_llm import FakeLLM

    from assistant.tui.screens import ConfirmScreen

    with FakeLLM() as fake:
        settings = unassessed.model_copy(update={"openai_base_url": fake.url, "model": "gpt-4o-mini"})
        app = make_app(settings, tmp_path)
        total = reopen(unassessed).count()

        async def script(pilot: Pilot[None]) -> None:
            await settle(pilot)
            await pilot.press("E")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            question = app.screen.question
            assert f"Assess {total:,} of the {total:,} papers in the view with gpt-4o-mini?" in question
            assert "tokens, about $" in question
            await pilot.press("n")
            await settle(pilot)
            assert fake.calls == 0 and not isinstance(app.screen, ConfirmScreen)
            await pilot.press("E")
            await settle(pilot)
            await pilot.press("y")
            await settle(pilot)
            assert fake.calls > 0
            assert all(i.assessment and i.assessment.engine == "llm" for i in reopen(unassessed).iter_all())

        drive(app, script)


@pytest.mark.parametrize("child", ["starts", "cannot start"])
def test_the_personal_model_trains_in_a_process_of_its_own(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: str
) -> None:
    """A large store's retrain runs in a child process (keys never wait on it); the queue it
    gives is the one a command gives for the same decisions. When the child cannot start, the
    UI says so and trains in its own process: the same queue."""
    import os
    import subprocess

    import numpy as np

    from assistant.personal import process, store_ranking
    from assistant.tui import workers

    monkeypatch.setattr(workers, "APART_FROM", 0)
    if child == "cannot start":

        def refuse(*args: object, **kwargs: object) -> None:
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(process.subprocess, "Popen", refuse)
    app = make_app(assessed, tmp_path)
    wanted = about_knowledge(assessed)
    children: list[subprocess.Popen[bytes]] = []

    async def script(pilot: Pilot[None]) -> None:
        for _ in range(14):
            pid = app.current_id()
            assert pid is not None
            await pilot.press("a" if pid in wanted else "x")
        await settle(pilot)
        assert app.ranking is not None and app.ranking.fit.decided == 14 and app.ranking.personal
        running = app.trainer._child
        if child == "starts":
            assert running is not None and running.pid != os.getpid() and running.poll() is None
            children.append(running)
        else:
            assert running is None and app._trainer_failed  # said once, in a notification
        command = store_ranking(reopen(assessed), cache_dir=tmp_path / "elsewhere").ranking
        ours = app.ranking
        theirs = [command.blended[command.position[i]] for i in ours.ids]
        np.testing.assert_allclose(ours.blended, theirs, atol=1e-3)

    drive(app, script)
    for running in children:
        assert running.poll() is not None  # closed with the UI


def test_the_first_blended_order_keeps_the_cursor_where_the_decisions_led(
    assessed: Settings, tmp_path: Path
) -> None:
    """The first blended ranking relabels the score column, which redraws the table: the
    cursor stays on an undecided paper, not on the top row (a decided paper the next key would
    decide again)."""
    app = make_app(assessed, tmp_path)
    app.schedule_retrain = lambda: None  # type: ignore[method-assign]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a", "x", "x", "x", "x", "x")
        assert app.table.cursor_row == 6 and app.ranking is not None and not app.ranking.personal
        app.retrain()
        await settle(pilot)
        assert app.ranking.personal and app.table.score_label == "blend"
        current = app.current_id()
        assert current is not None and app.index.rows[current].status is Status.NEW
        await pilot.press("a")
        decided = [r for r in app.index.rows.values() if r.status is not Status.NEW]
        assert len(decided) == 7  # seven keys, seven papers decided

    drive(app, script)


def test_lab_key_shows_what_others_accepted_that_you_have_not_decided(
    assessed: Settings, tmp_path: Path
) -> None:
    ids = [item.paper.id for item in reopen(assessed).iter_all()][:4]
    others = [Store.open(assessed.model_copy(update={"user": who})) for who in ("bob", "carol")]
    others[0].update_decision(ids[0], status=Status.ACCEPTED)
    others[1].update_decision(ids[1], starred=True)
    others[1].update_decision(ids[2], status=Status.REJECTED)
    others[0].update_decision(ids[3], status=Status.ACCEPTED)
    app = make_app(assessed.model_copy(update={"user": "alice"}), tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a")  # alice decides the paper under her cursor: it leaves her picks
        await settle(pilot)
        decided = {pid for pid, row in app.index.rows.items() if row.status is not Status.NEW}
        await pilot.press("L")
        assert set(app.shown) == {ids[0], ids[1], ids[3]} - decided
        assert "accepted by others this week, undecided by you" in app.view_label()
        await pilot.press("escape")
        assert len(app.shown) > 4

    drive(app, script)


def test_a_re_sort_keeps_the_highlighted_paper(assessed: Settings, tmp_path: Path) -> None:
    """S orders the view anew and the paper under the cursor stays under it, wherever the new
    order puts it (found among its first rows before any is added to the table)."""
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("j", "j", "j", "j", "j")
        current = app.current_id()
        assert current is not None
        places = set()
        for _ in range(4):
            await pilot.press("S")
            await settle(pilot)
            assert app.current_id() == current
            places.add(app.table.cursor_row)
        assert len(places) > 1  # the orders put it in different places

    drive(app, script)


def test_rows_below_the_first_page_are_read_when_shown_after_a_re_sort(tmp_path: Path) -> None:
    """A re-sort finds the highlighted paper among the view's first rows without taking them:
    a paper further down that another process decides meanwhile leaves the view when its page
    is shown, as it did when rows were read only page by page."""
    settings = load_settings(store=tmp_path / "store")
    fill(Store.open(settings), n=200)
    app = make_app(settings, tmp_path)
    app.schedule_retrain = lambda: None  # type: ignore[method-assign]  # (a new ranking reloads the view)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press(*"SSSSSS")  # round the sorts and back, keeping the highlighted paper
        await settle(pilot)
        assert len(app.shown) < len(list(app.rows_in_view()))  # one page so far
        below = [r.id for r in app.rows_in_view()][len(app.shown) + 10]
        reopen(settings).set_status([below], Status.ACCEPTED)
        await pilot.press("r")
        await settle(pilot)
        while not app.table.exhausted:
            app.table.load_more()
        assert below not in app.shown  # decided: out of the undecided view

    drive(app, script)


def test_the_queue_tables_cells_are_drawn_as_the_data_table_draws_them(
    assessed: Settings, tmp_path: Path
) -> None:
    """The queue table draws its one-line Text cells itself (faster than DataTable's generic
    path): every cell, highlighted or not, under the cursor or not, in every theme's look, is
    the same segments as DataTable's own rendering of it. Titles with wide characters, cut with
    an ellipsis, and empty cells included."""
    from rich.segment import Segment
    from rich.text import Text

    from assistant.tui.widgets import QueueTable

    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        table = app.query_one(QueueTable)
        first, second = table.shown[:2]
        # Cells longer than their column (Rich cuts them), wide characters, styled spans, empty.
        long = Text("論文の題名 — 長いタイトル " * 6, "bold") + Text(" tail", "italic red")
        table.update_row(first, {"title": long, "tags": Text("")})
        table.update_row(second, {"title": Text("x" * 300, overflow="ellipsis")})
        await settle(pilot)
        compared = 0
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            await settle(pilot)
            for row in range(min(table.row_count, 12)):
                for column in range(len(table.columns)):
                    width = list(table.columns.values())[column].get_render_width(table)
                    base = table.rich_style
                    for cursor, hover in ((False, False), (True, False), (False, True)):
                        table._cell_render_cache.clear()
                        ours = table._render_cell(row, column, base, width, cursor, hover)
                        table._cell_render_cache.clear()
                        theirs = DataTable._render_cell(table, row, column, base, width, cursor, hover)
                        assert [list(Segment.simplify(line)) for line in ours] == [
                            list(Segment.simplify(line)) for line in theirs
                        ], (theme, row, column, cursor)
                        compared += 1
        assert compared >= 3 * 12 * 4 * 3

    drive(app, script)
