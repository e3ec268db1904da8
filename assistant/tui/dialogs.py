"""The review UI's actions that go through a dialog: tags, note, lists, search, filter, link."""

from __future__ import annotations

import functools
import webbrowser
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from textual.app import SystemCommand
from textual.binding import Binding

from assistant.index import Sort
from assistant.selection import Selection
from assistant.tui.screens import (
    FilterChoices,
    FilterScreen,
    HelpScreen,
    ListsScreen,
    ListToggle,
    NoteScreen,
    SearchRequest,
    SearchScreen,
    TagsScreen,
)

if TYPE_CHECKING:
    from assistant.tui.app import ReviewApp

F = TypeVar("F", bound=Callable[..., Any])


def guarded(func: F) -> F:
    """Show an error from the store or an engine in a modal instead of crashing the UI."""

    @functools.wraps(func)
    def wrapper(app: ReviewApp, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(app, *args, **kwargs)
        except Exception as exc:  # shown to the user, never swallowed
            app.show_error(exc)
            return None

    return wrapper  # type: ignore[return-value]


def edit_tags(app: ReviewApp) -> None:
    pid = app.current_id()
    item = app.store.get(pid) if pid else None
    if pid is None or item is None:
        return

    @guarded
    def done(app: ReviewApp, tags: list[str] | None) -> None:
        if tags is not None:
            app.decide(pid, tags=tags)
            app.show_detail()

    app.push_screen(TagsScreen(item.decision.tags, app.index.vocabulary()), lambda t: done(app, t))


def edit_note(app: ReviewApp) -> None:
    pid = app.current_id()
    item = app.store.get(pid) if pid else None
    if pid is None or item is None:
        return

    @guarded
    def done(app: ReviewApp, note: str | None) -> None:
        if note is not None:
            app.decide(pid, note=note)
            app.show_detail()

    app.push_screen(NoteScreen(item.decision.note), lambda n: done(app, n))


def edit_lists(app: ReviewApp) -> None:
    pid = app.current_id()
    if pid is None:
        return

    @guarded
    def done(app: ReviewApp, choice: ListToggle | None) -> None:
        if choice is None:
            return
        name = app.lists.create(choice.name, exist_ok=True).name if choice.create else choice.name
        if name in app.index.rows[pid].lists and not choice.create:
            app.lists.remove(name, [pid])
            app.notify(f"Removed from “{name}”.", timeout=2)
        else:
            app.lists.add(name, [pid])  # the name field always adds, even to an existing list
            app.notify(f"Added to “{name}”.", timeout=2)
        app.update_rows([pid])

    names = [rl.name for rl in app.lists.all()]
    app.push_screen(ListsScreen(names, app.index.rows[pid].lists), lambda c: done(app, c))


def open_link(app: ReviewApp) -> None:
    pid = app.current_id()
    item = app.store.get(pid) if pid else None
    if item is None:
        return
    link = item.paper.link
    if not link:
        app.notify("This paper has no link.", severity="warning", timeout=3)
    elif webbrowser.open(link):
        app.notify(f"Opened {link}", timeout=3)
    else:
        app.copy_to_clipboard(link)
        app.notify(f"No browser found here; the link (copied to the clipboard): {link}", timeout=10)


def search(app: ReviewApp) -> None:
    @guarded
    def done(app: ReviewApp, request: SearchRequest | None) -> None:
        if request is None:
            return
        if request.semantic:
            hits = app.store.search(request.text, k=100)
            app.pin([h.item.paper.id for h in hits], f"nearest to “{request.text}”")
        else:
            app.pinned, app.text = None, request.text
            app.reload(keep_current=False)

    app.push_screen(SearchScreen(), lambda r: done(app, r))


def filter_queue(app: ReviewApp) -> None:
    choices = FilterChoices(
        topics=[t.name for t in app.agenda.topics] if app.agenda else [],
        tags=app.index.vocabulary(),
        lists=[rl.name for rl in app.lists.all()],
        sources=app.index.sources(),
    )

    def done(selection: Selection | None) -> None:
        if selection is not None:
            app.set_view("filtered", selection)

    app.push_screen(FilterScreen(app.selection, choices), done)


def commands(app: ReviewApp, views: list[str]) -> Iterator[SystemCommand]:
    """The review UI's entries in the command palette."""
    for sort in Sort:
        yield SystemCommand(
            f"Sort by {sort.value}", f"Order the queue by {sort.value}", functools.partial(app.set_sort, sort)
        )
    for name in views:
        yield SystemCommand(f"Show {name}", f"Show {name} papers", functools.partial(app.set_view, name))
    yield SystemCommand("Assess all visible", "Assess the papers in this view", app.action_assess_visible)
    yield SystemCommand("Refresh", "Read new assessments and decisions from the store", app.action_refresh)
    yield SystemCommand("Clear filters", "Show every undecided paper", app.clear_filters)


def show_help(app: ReviewApp, bindings: Iterable[Any]) -> None:
    rows = [
        (b.key.replace("question_mark", "?").replace("slash", "/"), b.description)
        for b in bindings
        if isinstance(b, Binding)
    ]
    rows += [
        ("↑ ↓ pgup pgdn", "Move in the queue"),
        ("home g / end G", "First paper / last paper read so far (the next page follows)"),
        ("enter", "The detail pane alone (for narrow terminals), or back"),
        ("ctrl+p", "Command palette (sorts, views, ...)"),
    ]
    app.push_screen(HelpScreen(rows))
