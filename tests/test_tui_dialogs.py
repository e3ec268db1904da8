"""The review UI's room for titles, its search line and dialogs (tags, note), and the shape of tui/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Label, TextArea
from tui_support import copy_store, drive, make_app, ranked_ids, reopen, settle, template

import assistant.tui
from assistant.config import Settings
from assistant.models import Paper, Status
from assistant.tui.screens import (
    ListsScreen,
    MeaningCheckbox,
    NoteScreen,
    SearchBar,
    TagsScreen,
    subject,
)
from assistant.tui.widgets import KeyFooter, column_widths

LONG_TITLE = (
    "A Remarkably Long Title About Cross-Lingual Transfer of Parameter-Efficient Adapters "
    "in Low-Resource Speech and Text Models"
)


@pytest.fixture(scope="module")
def assessed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template(tmp_path_factory.mktemp("tui-dialogs"), assess=True)


@pytest.fixture
def assessed(assessed_template: Path, tmp_path: Path) -> Settings:
    return copy_store(assessed_template, tmp_path / "store")


# -- the queue's columns ----------------------------------------------------------------------


@pytest.mark.parametrize(("size", "least"), [((80, 24), 36), ((100, 30), 56), ((160, 45), 50)])
def test_the_title_takes_the_room_the_other_columns_leave(
    assessed: Settings, tmp_path: Path, size: tuple[int, int], least: int
) -> None:
    """On a 100x30 terminal the title had 36 columns and tags/status/source 44: now the title
    is wider than tags, status and source together, and the table fits without scrolling sideways."""
    reopen(assessed).upsert_papers([Paper.create(title=LONG_TITLE, sources=["sample"])])
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        widths = app.table.widths
        assert widths["title"] >= least
        assert widths["title"] > sum(w for k, w in widths.items() if k not in ("title", "rel"))
        assert app.table.virtual_size.width <= app.table.size.width  # no sideways scrolling
        cells = app.table.get_row(
            app.index.rows[next(i for i in app.shown if "Remarkably" in app.index.rows[i].title)].id
        )
        shown = str(cells[1])
        assert shown.endswith("…") and len(shown) == widths["title"]

    async def find_it(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"Remarkably")
        app.query_one(MeaningCheckbox).value = False
        await pilot.press("enter")
        await script(pilot)

    drive(app, find_it, size=size)


def test_column_widths_narrow_the_side_columns_first() -> None:
    assert column_widths(100) == {"rel": 11, "title": 56, "tags": 12, "status": 10}
    wide = column_widths(150)
    assert list(wide) == ["rel", "title", "tags", "status", "source"]
    assert wide["tags"] == 18 and wide["source"] == 12
    assert column_widths(40)["title"] == 20  # never less than that


# -- the dialogs say which paper they edit ------------------------------------------------------


def test_subject_cuts_a_long_title_at_a_word() -> None:
    assert subject("Short title") == "“Short title”"
    cut = subject(LONG_TITLE, 40)
    assert cut.startswith("“A Remarkably Long") and cut.endswith("…”") and len(cut) <= 42
    assert not cut[:-2].endswith(" ")


def test_the_tags_note_and_lists_dialogs_name_their_paper(assessed: Settings, tmp_path: Path) -> None:
    reopen(assessed).upsert_papers([Paper.create(title=LONG_TITLE, sources=["sample"])])
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        app.table.move_cursor(row=app.shown.index(Paper.create(title=LONG_TITLE).id))
        await pilot.pause()
        await pilot.press("t")
        assert isinstance(app.screen, TagsScreen)
        heading = app.screen.query_one("#subject", Label).render().plain  # type: ignore[union-attr]
        assert heading.startswith("Tags of “A Remarkably Long Title") and heading.endswith("…”")
        app.screen.query_one(Input).value = "adapters"
        await pilot.press("enter")
        await pilot.press("n")
        assert isinstance(app.screen, NoteScreen)
        heading = app.screen.query_one("#subject", Label).render().plain  # type: ignore[union-attr]
        assert heading.startswith("Note on “A Remarkably Long Title")
        app.screen.query_one(TextArea).text = "Compare with ours."
        await pilot.press("ctrl+s")
        await pilot.press("l")
        assert isinstance(app.screen, ListsScreen)
        heading = app.screen.query_one("#subject", Label).render().plain  # type: ignore[union-attr]
        assert heading.startswith("Lists of “A Remarkably Long Title")
        await pilot.press("escape")
        item = reopen(assessed).get(Paper.create(title=LONG_TITLE).id)
        assert item is not None and item.decision.tags == ["adapters"]
        assert item.decision.note == "Compare with ours."

    drive(app, script)


# -- the search dialog --------------------------------------------------------------------------


def test_enter_on_the_by_meaning_switch_searches_and_its_state_is_spelt_out(
    assessed: Settings, tmp_path: Path
) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        bar = app.query_one(SearchBar)
        status = app.query_one("#status-line")
        assert not bar.display and status.display
        await pilot.press("slash")
        # The search line takes the status line's place: the queue keeps its size.
        assert bar.display and not status.display and isinstance(app.focused, Input)
        switch = app.query_one(MeaningCheckbox)
        on_text = switch.render().plain
        assert "✓" in on_text and "by meaning" in on_text
        # Enter with nothing to look for: the line stays, the cursor goes to the field.
        await pilot.press("tab")
        assert app.focused is switch
        await pilot.press("enter")
        assert bar.display and isinstance(app.focused, Input)
        await pilot.press(*"multilingual", "tab", "space")
        assert app.focused is switch and switch.value is False
        off_text = switch.render().plain
        assert "✓" not in off_text and "by words" in off_text  # not a colour alone
        await pilot.press("space", "space")  # space switches, and back
        assert switch.value is False
        await pilot.press("enter")  # on the switch: searches, does not switch
        await settle(pilot)
        assert not bar.display and status.display and app.focused is app.table
        assert app.text == "multilingual" and 'words "multilingual"' in app.view_label()
        assert app.shown and all("multilingual" in app.index.rows[i].text for i in app.shown)
        # By meaning, from the switch too: the line opens empty and by meaning again.
        await pilot.press("escape", "slash")
        assert app.query_one("#query", Input).value == "" and switch.value is True
        await pilot.press(*"speech recognition for African languages", "tab", "enter")
        await settle(pilot)
        assert "nearest to" in app.view_label()
        assert app.shown[0] in ranked_ids(reopen(assessed))
        # Escape in the line puts it away and changes nothing.
        shown = list(app.shown)
        await pilot.press("slash", *"anything", "escape")
        await settle(pilot)
        assert not bar.display and status.display and app.shown == shown

    drive(app, script)


# -- the house ------------------------------------------------------------------------------


def tui_imports() -> dict[str, set[str]]:
    """Each module of assistant/tui and the modules of assistant/tui it imports (type-only
    imports included)."""
    root = Path(assistant.tui.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        name = f"assistant.tui.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {
            m for m in found if m.startswith("assistant.tui.") and m != name and m in module_names(root)
        }
    return graph


def module_names(root: Path) -> set[str]:
    return {f"assistant.tui.{p.stem}" for p in root.glob("*.py")}


def test_the_tui_modules_import_one_way() -> None:
    graph = tui_imports()
    for module in ("dialogs", "screens", "widgets"):
        assert "assistant.tui.app" not in graph[f"assistant.tui.{module}"], module
    # No cycle: a depth-first walk never meets a module still on its path.
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in graph.get(name, ()):
            assert state.get(dep) != 1, " -> ".join([*path, name, dep])
            if dep not in state:
                visit(dep, [*path, name])
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [])


def test_the_search_line_has_the_keys_while_it_is_open(assessed: Settings, tmp_path: Path) -> None:
    """With the search line open the queue's keys do nothing (as under a dialog), the footer
    shows the line's keys, tabbing out of it puts it away, and the focus goes back to where it
    was before `/`: the detail pane read alone in a narrow terminal."""
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        first = app.current_id()
        assert first is not None
        bar = app.query_one(SearchBar)
        await pilot.press("slash", "tab")
        assert isinstance(app.focused, MeaningCheckbox)
        await pilot.press("x", "a", "D")  # the queue's keys: nothing happens
        await settle(pilot)
        assert reopen(assessed).get(first).decision.status is Status.NEW  # type: ignore[union-attr]
        assert bar.display and app.screen is app.screen_stack[0]
        footer = app.query_one(KeyFooter)
        assert {d for _, _, d, _ in footer.shown} >= {"Search", "Cancel"}
        assert "Accept" not in {d for _, _, d, _ in footer.shown}
        await pilot.press("tab")  # out of the line: it goes away, the queue has its keys again
        await settle(pilot)
        assert not bar.display and app.query_one("#status-line").display
        assert "Accept" in {d for _, _, d, _ in footer.shown}
        # The detail pane read alone (enter), then / and escape: the focus is back on it.
        await pilot.press("enter")
        detail = app.query_one("#detail-pane")
        detail.focus()
        await pilot.press("slash", "escape")
        await settle(pilot)
        assert app.focused is detail and app.current_id() == first

    drive(app, script, size=(120, 40))
