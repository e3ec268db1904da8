"""What the review UI's dialogs need that is not a screen: the question a delete asks, the
help's rows, and the guard that turns an error into a modal.

Dialogs (assistant.tui.screens) return their result with `dismiss`; the app pushes them with
`push_screen(screen, callback)` and acts on the result. Nothing here knows the app.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from textual.binding import Binding

from assistant.models import Status, StoredPaper
from assistant.tui.screens import subject

F = TypeVar("F", bound=Callable[..., Any])


class ShowsErrors(Protocol):
    def show_error(self, exc: BaseException) -> None: ...


def guarded(func: F) -> F:
    """Show an error from the store or an engine in a modal instead of crashing the UI (for
    methods of an object that can show errors: the app)."""

    @functools.wraps(func)
    def wrapper(owner: ShowsErrors, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(owner, *args, **kwargs)
        except Exception as exc:  # shown to the user, never swallowed
            owner.show_error(exc)
            return None

    return wrapper  # type: ignore[return-value]


def delete_question(items: Sequence[StoredPaper]) -> str:
    """The question before papers are deleted: which papers, and what goes with them."""
    if len(items) == 1:
        what = f"{subject(items[0].paper.title, 150)} ({items[0].paper.id})"
    else:
        names = ", ".join(subject(i.paper.title, 40) for i in items[:3])
        what = f"{len(items)} papers: {names}" + (f" and {len(items) - 3} more" if len(items) > 3 else "")
    carried = list(dict.fromkeys(part for item in items for part in _kept(item)))
    it = "it" if len(items) == 1 else "them"
    goes = f" Your {_and(carried)} go with {it}." if carried else ""
    return f"Delete {what} from the store?{goes} u brings {it} back."


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _kept(item: StoredPaper) -> list[str]:
    """What of the researcher's own a paper carries."""
    d = item.decision
    parts = [f"decision ({d.status.value})"] if d.status is not Status.NEW else []
    parts += ["star"] * d.starred + ["tags"] * bool(d.tags) + ["note"] * bool(d.note)
    parts += ["lists"] * bool(d.lists)
    return parts


def help_rows(bindings: Iterable[Any]) -> list[tuple[str, str]]:
    """Every key the help lists: the app's bindings, then the table's and the palette."""
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
    return rows
