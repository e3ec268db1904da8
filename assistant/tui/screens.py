"""Modal screens of the review UI (help, filter, tags, note, lists, errors) and its search line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import (
    Button,
    Checkbox,
    Input,
    Label,
    OptionList,
    Select,
    SelectionList,
    Static,
    TextArea,
)
from textual.widgets.option_list import Option

from assistant.errors import TriageError
from assistant.models import Status
from assistant.selection import Selection, parse_when


class ErrorScreen(ModalScreen[None]):
    """An error from the store or an engine: shown, never a crash."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="error"):
            yield Label(f"[b red]{escape(self.title_text)}[/]")
            yield Static(escape(self.message), id="message")
            yield Button("Close", variant="error", id="close")

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss()


class ConfirmScreen(ModalScreen[bool]):
    """A question before something that costs (LLM calls): y or enter goes ahead, n or escape
    does not."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(escape(self.question), id="question")
            yield Label("[b]y[/b] / enter: go ahead    [b]n[/b] / escape: cancel")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ConfirmDeleteScreen(ConfirmScreen, inherit_bindings=False):
    """A question before a delete: only y goes ahead (enter, pressed out of habit, keeps)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Delete"),
        Binding("n,escape,enter", "answer(False)", "Keep"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="delete"):
            yield Static(escape(self.question), id="question")
            yield Label("[b]y[/b]: delete    [b]n[/b] / escape / enter: keep")


class HelpScreen(ModalScreen[None]):
    """Every key binding, with what it does."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, bindings: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("action")
        for key, text in self.rows:
            table.add_row(key, text)
        with VerticalScroll(id="dialog", classes="help"):
            yield Label("[b]Keys[/b]  (ctrl+p opens the command palette for everything else)")
            yield Static(table)
            yield Label("[dim]escape closes this help[/dim]")


@dataclass
class FilterChoices:
    """What the filter dialog offers."""

    topics: list[str]
    tags: list[str]
    lists: list[str]
    sources: list[str]


class ListSuggester(Suggester):
    """Completes the last item of a comma-separated list from a vocabulary."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.vocabulary = list(vocabulary)

    async def get_suggestion(self, value: str) -> str | None:
        head, _, last = value.rpartition(",")
        stem = last.lstrip()
        if not stem:
            return None
        done = {t.strip() for t in head.split(",")}
        for word in self.vocabulary:
            if word.startswith(stem) and word != stem and word not in done:
                return value + word[len(stem) :]
        return None


def subject(title: str, width: int = 64) -> str:
    """A paper's title as a dialog names it: quoted, cut at a word to `width` characters."""
    if len(title) > width:
        title = title[: width - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return f"“{title}”"


def split_items(text: str) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))


class FilterScreen(ModalScreen[Selection | None]):
    """Status, starred, tag, topic, minimum score, list, source and date range, combined."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "apply", "Apply")]

    def __init__(self, current: Selection, choices: FilterChoices) -> None:
        super().__init__()
        self.current = current
        self.choices = choices

    def compose(self) -> ComposeResult:
        c, ch = self.current, self.choices
        with VerticalScroll(id="dialog", classes="filter"):
            yield Label("[b]Filter the queue[/b]  (ctrl+s or Apply; every filter given must hold)")
            yield SelectionList[str](*[(s.value, s.value, s in c.statuses) for s in Status], id="statuses")
            yield Checkbox("starred only", c.starred, id="starred")
            yield Input(
                ", ".join(c.tags),
                placeholder="tags, comma-separated (→ completes)",
                suggester=ListSuggester(ch.tags),
                id="tags",
            )
            yield Select(
                [(t, t) for t in ch.topics], value=c.topic or Select.NULL, prompt="any topic", id="topic"
            )
            yield Input(
                "" if c.min_score is None else f"{c.min_score:g}",
                placeholder="minimum score 0-10 (of the topic, else of the relevance)",
                id="min_score",
            )
            yield Select(
                [(n, n) for n in ch.lists], value=c.list_name or Select.NULL, prompt="any list", id="list"
            )
            yield Select(
                [(s, s) for s in ch.sources], value=c.source or Select.NULL, prompt="any source", id="source"
            )
            with Horizontal(classes="dates"):
                yield Input(
                    c.since.isoformat() if c.since else "", placeholder="since: 2024-05-01, 30d", id="since"
                )
                yield Input(
                    c.until.isoformat() if c.until else "", placeholder="until: 2025-01-01", id="until"
                )
            yield Static("", id="problem")
            with Horizontal(classes="buttons"):
                yield Button("Apply", variant="primary", id="apply")
                yield Button("Clear all", id="clear")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#statuses").focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#clear")
    def _clear(self) -> None:
        self.dismiss(Selection())

    @on(Button.Pressed, "#apply")
    @on(Input.Submitted)
    def action_apply(self) -> None:
        try:
            self.dismiss(self.selection())
        except TriageError as exc:
            self.query_one("#problem", Static).update(f"[red]{escape(str(exc))}[/red]")

    def selection(self) -> Selection:
        def value(widget_id: str) -> str:
            return self.query_one(f"#{widget_id}", Input).value.strip()

        def choice(widget_id: str) -> str | None:
            v = self.query_one(f"#{widget_id}", Select).value
            return v if isinstance(v, str) else None

        score = value("min_score")
        try:
            min_score = float(score) if score else None
        except ValueError:
            raise TriageError(f"minimum score must be a number from 0 to 10, not {score!r}") from None
        if min_score is not None and not 0 <= min_score <= 10:
            raise TriageError("minimum score must be from 0 to 10")
        since, until = value("since"), value("until")
        return Selection(
            statuses=tuple(Status(s) for s in self.query_one("#statuses", SelectionList).selected),
            tags=tuple(split_items(value("tags"))),
            topic=choice("topic"),
            min_score=min_score,
            list_name=choice("list"),
            source=choice("source"),
            since=parse_when(since) if since else None,
            until=parse_when(until) if until else None,
            starred=self.query_one("#starred", Checkbox).value,
        )


class TagsScreen(ModalScreen[list[str] | None]):
    """Edit the paper's own tags, with completion from the store's vocabulary."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, tags: Sequence[str], vocabulary: Sequence[str], title: str = "") -> None:
        super().__init__()
        self.tags = list(tags)
        self.vocabulary = vocabulary
        self.paper_title = title

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Label(f"[b]Tags of[/b] {escape(subject(self.paper_title))}", id="subject")
            yield Label("comma-separated; → accepts a completion; enter saves, escape cancels")
            yield Input(
                ", ".join(self.tags) + (", " if self.tags else ""),
                suggester=ListSuggester(self.vocabulary),
                id="tags",
            )

    @on(Input.Submitted)
    def _save(self, event: Input.Submitted) -> None:
        self.dismiss([t.lower() for t in split_items(event.value)])

    def action_cancel(self) -> None:
        self.dismiss(None)


class NoteScreen(ModalScreen[str | None]):
    """Write the paper's note."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "save", "Save")]

    def __init__(self, note: str, title: str = "") -> None:
        super().__init__()
        self.note = note
        self.paper_title = title
        self.warned = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="note"):
            yield Label(f"[b]Note on[/b] {escape(subject(self.paper_title))}", id="subject")
            yield Label("ctrl+s saves, escape cancels", id="hint")
            yield TextArea(self.note, id="note")

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text.strip())

    def action_cancel(self) -> None:
        changed = self.query_one(TextArea).text.strip() != self.note.strip()
        if changed and not self.warned:
            self.warned = True
            self.query_one("#hint", Label).update("[yellow]not saved: ctrl+s saves, escape again discards[/]")
            return
        self.dismiss(None)


@dataclass
class ListToggle:
    name: str
    create: bool = False


class ListsScreen(ModalScreen[ListToggle | None]):
    """Put the paper in a reading list or take it out; or create a list."""

    BINDINGS = [Binding("escape", "cancel", "Close")]

    def __init__(self, lists: Sequence[str], member_of: Sequence[str], title: str = "") -> None:
        super().__init__()
        self.lists = list(lists)
        self.member_of = set(member_of)
        self.paper_title = title

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="lists"):
            if self.paper_title:
                yield Label(f"[b]Lists of[/b] {escape(subject(self.paper_title))}", id="subject")
            yield Label("[b]Reading lists[/b] (enter adds or removes the paper; ✓ = in the list)")
            options = [
                Option(("✓ " if name in self.member_of else "  ") + name, id=f"list-{i}")
                for i, name in enumerate(self.lists)
            ]
            yield OptionList(*options, id="lists")
            yield Input(placeholder="new list name, enter creates it and adds the paper", id="new")

    def on_mount(self) -> None:
        # With no list yet the only thing to do is to name one.
        self.query_one("#lists" if self.lists else "#new").focus()

    @on(OptionList.OptionSelected)
    def _toggle(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(ListToggle(self.lists[event.option_index]))

    @on(Input.Submitted)
    def _create(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(ListToggle(event.value.strip(), create=True))

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass
class SearchRequest:
    text: str
    semantic: bool


class MeaningCheckbox(Checkbox, inherit_bindings=False):
    """The search line's "by meaning" switch: space switches it, enter searches (it is left
    to the line), and its state is spelt out, not shown by colour alone."""

    BINDINGS = [Binding("space", "toggle_button", "Switch", show=False)]
    ON = "by meaning (space: by words)"
    OFF = "by words: titles, authors, tags (space: by meaning)"

    def __init__(self, value: bool, **kwargs: Any) -> None:
        super().__init__(self.ON if value else self.OFF, value, **kwargs)
        self.BUTTON_INNER = "✓" if value else " "

    def watch_value(self) -> None:
        self.BUTTON_INNER = "✓" if self.value else " "
        self.label = self.ON if self.value else self.OFF
        super().watch_value()


class QueryInput(Input):
    """The search line's field: its enter is shown in the footer as searching."""

    BINDINGS = [Binding("enter", "submit", "Search")]


class SearchBar(Horizontal):
    """Search by meaning (the store's embeddings) or by words in titles, authors and tags: a
    line in place of the status line, the queue in view while typing (a dialog over the queue
    cost ~100 ms to open at 10,000 papers). Enter searches, escape puts the line away; the
    app hears `SearchBar.Done` with the request, or None."""

    BINDINGS = [Binding("enter", "search", "Search"), Binding("escape", "cancel", "Cancel")]

    @dataclass
    class Done(Message):
        request: SearchRequest | None

    def compose(self) -> ComposeResult:
        yield Label("[b]Search[/b] ", id="search-label")
        yield QueryInput(placeholder="what are you looking for?", id="query")
        yield MeaningCheckbox(True, id="semantic")

    def open(self) -> None:
        """Shown empty, by meaning (as the first time), the cursor in the field."""
        query = self.query_one("#query", Input)
        query.value = ""
        self.query_one(MeaningCheckbox).value = True
        self.display = True
        query.focus()

    def close(self, request: SearchRequest | None) -> None:
        self.display = False
        self.post_message(self.Done(request))

    def on_descendant_blur(self) -> None:
        """The focus left the field or the switch: if it left the line (tab past it, a click
        on the queue), the line is put away as escape would."""
        self.call_after_refresh(self._focus_left)

    def _focus_left(self) -> None:
        focused = self.app.focused
        if self.display and (focused is None or self not in focused.ancestors_with_self):
            self.close(None)

    @on(Input.Submitted)
    def action_search(self) -> None:
        """Enter, wherever the focus is: search for what the field says (if anything)."""
        query = self.query_one("#query", Input)
        if query.value.strip():
            self.close(SearchRequest(query.value.strip(), self.query_one(MeaningCheckbox).value))
        else:
            query.focus()

    def action_cancel(self) -> None:
        self.close(None)
