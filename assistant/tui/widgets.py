"""The review screen's parts, and how they render a paper: the queue table and its cells,
the summary bar, the detail pane."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widget import PseudoClasses, Widget
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey, RowKey

from assistant.agenda import Agenda
from assistant.index import Row
from assistant.models import Status, StoredPaper
from assistant.render import relevance_bar
from assistant.triage.keys import OFFLINE_ENGINE

if TYPE_CHECKING:
    from assistant.personal import Explanation

STATUS_STYLE = {
    Status.NEW: "dim",
    Status.ACCEPTED: "bold green",
    Status.REJECTED: "red",
    Status.MAYBE: "yellow",
}
SPARK = " ▁▂▃▄▅▆▇█"


def clip(text: str, width: int) -> str:
    """`text` cut at a word to fit `width` characters (an ellipsis says it was cut)."""
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"


def spark(values: list[int]) -> str:
    """A one-line histogram."""
    top = max(values, default=0)
    if top == 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(8, (v * 8 + top - 1) // top)] for v in values)


COLUMNS = (
    ("relevance", "rel"),
    ("title", "title"),
    ("tags", "tags"),
    ("status", "status"),
    ("source", "source"),
)
PAGE = 60  # rows added to the table at a time (a screenful and a half)
MIN_TITLE = 20
EDGES = 3  # the table's edges and scrollbar


def column_widths(width: int) -> dict[str, int]:
    """The queue's columns for a table `width` cells wide, in order. Relevance and status keep
    their width; tags and source narrow on a narrow table (source, which the detail pane shows,
    is left out below 120 cells); the title takes the rest."""
    tags, source = (18, 12) if width >= 140 else (14, 10) if width >= 120 else (12, 0)
    widths = {"rel": 11, "title": 0, "tags": tags, "status": 10, "source": source}
    widths = {k: w for k, w in widths.items() if k == "title" or w}
    others = sum(widths.values()) + 2 * len(widths) + EDGES  # each cell has a space either side
    widths["title"] = max(MIN_TITLE, width - others)
    return widths


class QueueTable(DataTable[Any]):
    """The queue, read from a lazy sequence of rows a page at a time.

    home/end (and g/G) move to the first and last paper instead of scrolling sideways.
    """

    BINDINGS = [
        Binding("home,g", "first_row", "First paper", show=False),
        Binding("end,G", "last_row", "Last paper", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.shown: list[str] = []
        self.exhausted = True
        self.widths: dict[str, int] = {}
        self._rows: Iterator[Row] = iter(())
        # The score shown for a paper (the personal ranking's), else its relevance; the
        # column's heading says which ("blend", or the engine's "relevance").
        self.score_of: Callable[[str], float | None] | None = None
        self.score_label = "relevance"
        # A mark after the status (the disagreement sort's ↑ / ↓), if any.
        self.mark_of: Callable[[str], str] | None = None
        # Papers whose change the store refused: their rows say "not saved".
        self.unsaved: set[str] = set()
        self._last_look: tuple[Any, ...] | None = None

    def cells(self, row: Row) -> tuple[RenderableType, ...]:
        score = self.score_of(row.id) if self.score_of is not None else row.relevance
        mark = self.mark_of(row.id) if self.mark_of is not None else ""
        return row_cells(row, self.widths or column_widths(120), score, mark, row.id in self.unsaved)

    def set_columns(self, widths: dict[str, int]) -> None:
        """Lay the columns out anew (`column_widths`); the rows are to be filled again."""
        self.widths = dict(widths)
        self.clear(columns=True)
        for label, key in COLUMNS:
            if key in widths:
                self.add_column(self.score_label if key == "rel" else label, key=key, width=widths[key])

    def fill(self, rows: Iterator[Row], keep: str | None = None, at: int | None = None) -> None:
        """Show these rows from the top, read a page at a time as the cursor gets near (each
        row as the index has it then); with `keep` at place `at` of them, rows are added as
        far as it and it is highlighted."""
        self.clear()
        self.shown = []
        self._rows = rows
        self.exhausted = False
        self.load_more()
        while at is not None and len(self.shown) <= at and not self.exhausted:
            self.load_more()
        if keep and at is not None and at < len(self.shown) and self.shown[at] == keep:
            self.move_cursor(row=at, animate=False)

    def follow(self, rows: Iterator[Row]) -> None:
        """Go on from these rows: the same view as the rows shown, from a fuller index (rows
        already shown are skipped)."""
        self._rows = itertools.islice(rows, len(self.shown), None)
        self.exhausted = False

    def load_more(self) -> None:
        rows = list(itertools.islice(self._rows, PAGE))
        if len(rows) < PAGE:
            self.exhausted = True
        for row in rows:
            self.add_row(*self.cells(row), key=row.id)
            self.shown.append(row.id)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Every column has a fixed width and every row one line, so measuring each new row's
        cells, which DataTable does to size columns of automatic width, changes nothing; it
        cost ~25 ms for the rows a re-sort reads to keep the highlighted paper."""
        fixed = all(not column.auto_width for column in self.columns.values())
        super()._update_dimensions(() if fixed else new_rows)

    # The table is styled alike with the focus and without it (app.tcss), yet DataTable drops
    # every cached render when its styles are applied again (a change of focus: opening the
    # search line or a dialog, and back) and keys them by the focus too: each drew every
    # visible row again (~25 ms at 10k papers). Here a render is dropped only when the look
    # of the table (its style and its parts') did change.

    def get_pseudo_class_state(self) -> PseudoClasses:
        return super().get_pseudo_class_state()._replace(focus=True)

    def notify_style_update(self) -> None:
        look = self._look()
        if look is not None and look == self._last_look:
            Widget.notify_style_update(self)  # not DataTable's, which drops every render
            return
        self._last_look = look
        super().notify_style_update()

    def _look(self) -> tuple[Any, ...] | None:
        try:
            parts = [self.get_component_rich_style(name) for name in sorted(self.COMPONENT_CLASSES)]
        except KeyError:  # its parts' styles not there yet (mounting)
            return None
        return (self.rich_style, *parts)

    # A cell of the queue is a one-line Text in a column of fixed width. DataTable renders each
    # through Rich's Padding and Styled renderables and a console pass (~70 us a cell: ~10 ms of
    # each refill at 170 columns); here the same segments are made straight from the Text (its
    # spans rendered, padded to the column, the cell's styles applied over them), cached as
    # DataTable caches its own. Anything else (the header, a cell of other content) is
    # DataTable's.

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        row_key = self._row_locations.get_key(row_index) if row_index >= 0 else None
        column_key = self._column_locations.get_key(column_index) if column_index >= 0 else None
        cell = self._data.get(row_key, {}).get(column_key) if row_key is not None and column_key else None
        meta = self.rows.get(row_key) if row_key is not None else None
        if (
            row_key is None
            or column_key is None
            or self.fixed_rows
            or self.fixed_columns
            or not isinstance(cell, Text)
            or meta is None
            or meta.height != 1
            or "\n" in cell.plain
            or "\t" in cell.plain
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        lines = self._cell_render_cache.get(key)
        if lines is not None:
            return lines
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
        lines = [_cell_line(self.app.console, cell, width, self.cell_padding, pre_style, post_style)]
        self._cell_render_cache[key] = lines
        return lines

    def current_id(self) -> str | None:
        row = self.cursor_row if self.shown else -1
        return self.shown[row] if 0 <= row < len(self.shown) else None

    def redraw(self, rows: list[Row]) -> None:
        """Redraw the cells that changed."""
        shown = set(self.shown)
        for row in rows:
            if row.id in shown:
                current = self.get_row(row.id)
                changed = {
                    key: cell
                    for key, cell, old in zip(self.widths, self.cells(row), current, strict=True)
                    if cell != old
                }
                if changed:
                    self.update_row(row.id, changed)

    def update_row(self, pid: str, cells: dict[str, RenderableType]) -> None:
        """Put new cells in one row and render that row alone again.

        DataTable's `update_cell` bumps a counter that every cached cell and line is keyed by,
        so each change rendered every visible row again (~40 rows of 5 cells: most of what a
        decision key cost). Here only the row's own cached renders are dropped (the lines are
        put together again from the cached rows). Should the table's caches not be where they
        were, `update_cell` does it the slow way."""
        key = RowKey(pid)
        try:
            data = self._data[key]
            caches: tuple[Any, ...] = (self._cell_render_cache, self._row_render_cache)
            lines = self._line_cache
        except (AttributeError, KeyError):
            for column, cell in cells.items():
                self.update_cell(pid, column, cell)
            return
        for column, cell in cells.items():
            data[ColumnKey(column)] = cell
        for cache in caches:
            for cached in [k for k in cache.keys() if k[0] == key]:
                cache.discard(cached)
        lines.clear()
        self.refresh()

    def drop(self, pid: str) -> None:
        """Take a paper's row out (the cursor stays on the row that takes its place)."""
        if pid not in self.shown:
            return
        self.remove_row(pid)
        self.shown.remove(pid)
        if not self.exhausted and self.cursor_row >= len(self.shown) - 1:
            self.load_more()

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)


class Summary(Static):
    """Counts by status, the relevance distribution, and what the queue shows."""

    def show(
        self,
        counts: dict[Status, int],
        histogram: list[int],
        view: str,
        matching: int | None,
        personal: str = "",
    ) -> None:
        parts = [f"[{STATUS_STYLE[s]}]{s.value} {counts.get(s, 0):,}[/]" for s in Status]
        shown = "…" if matching is None else f"{matching:,}"
        self.update(
            " · ".join(parts)
            + f"   relevance 0 [cyan]{spark(histogram)}[/] 10"
            + f"   [b]{escape(view)}[/b]: {shown}"
            + (f"   [magenta]{escape(personal)}[/]" if personal else ""),
            layout=False,  # one line whatever it says: no layout of the screen for it
        )


UNSAVED_MARK = "NOT SAVED "


def _cell_line(
    console: Console, cell: Text, width: int, padding: int, pre: Style, post: Style
) -> list[Segment]:
    """One line of a table cell as DataTable renders it (`Styled(Padding(cell, (0, padding)),
    pre, post)` at `width`, one line, no wrapping): the Text cut to the inner width as Rich
    cuts it, padded with spaces, the padding on both sides, `pre` and `post` over it all."""
    inner = max(0, width - 2 * padding)
    text = cell.copy()
    text.end = ""
    if text.cell_len > inner:
        text.truncate(inner, overflow=cell.overflow or console.options.overflow or "fold")
    # As Text renders itself: its lines joined (its style becomes a span under the others).
    segments = list(Text("\n").join([text]).render(console))
    short = inner - text.cell_len
    if short > 0:
        segments.append(Segment(" " * short))
    if padding:
        pad = Segment(" " * padding, Style())
        segments = [pad, *segments, pad]
    return list(Segment.apply_style(segments, console.get_style(pre), console.get_style(post)))


def row_cells(
    row: Row,
    widths: dict[str, int] | None = None,
    score: float | None = None,
    mark: str = "",
    unsaved: bool = False,
) -> tuple[RenderableType, ...]:
    """The queue table's cells for one paper, one per column of `widths` (`column_widths`);
    `score`: what the bar shows, by default its relevance; `mark`: shown after the status;
    `unsaved`: the store refused the paper's last change (the title says so first)."""
    widths = widths or column_widths(120)
    cells: dict[str, RenderableType] = {
        "rel": relevance_bar(score if score is not None else row.relevance, 6)
    }
    title = Text(UNSAVED_MARK, "bold red") + Text(row.title) if unsaved else Text(row.title)
    title.truncate(widths["title"], overflow="ellipsis")
    cells["title"] = title
    tags = Text(", ".join(row.tags[:3]), "cyan")
    tags.truncate(widths["tags"], overflow="ellipsis")
    cells["tags"] = tags
    status = Text(row.status.value + (" ★" if row.starred else ""), STATUS_STYLE[row.status])
    if row.failed and row.relevance is None:
        status.append(" failed", "red")
    if mark:
        status.append(f" {mark}", "magenta")
    cells["status"] = status
    if "source" in widths:
        source = Text((row.sources[0].split(":", 1)[-1] if row.sources else ""), "dim")
        source.truncate(widths["source"], overflow="ellipsis")
        cells["source"] = source
    return tuple(cells[key] for key in widths)


class Detail(Static):
    """Everything about the highlighted paper."""

    def show(
        self,
        item: StoredPaper | None,
        agenda: Agenda | None,
        stale: bool,
        explanation: Explanation | None = None,
        note: str = "",
    ) -> None:
        if item is None:
            self.update(Text("No paper here: change the filter (f) or the view (v).", "dim"))
            return
        self.update(render_detail(item, agenda, stale, explanation, note))

    def show_unreachable(self, location: str) -> None:
        self.update(
            Text(
                f"The Chroma server at {location} cannot be reached: this paper's details show "
                "when it answers. Decisions are kept meanwhile.",
                "dim",
            )
        )


def engine_label(engine: str) -> str:
    """What an assessment's score is called: the offline engine's, or an LLM's."""
    return "engine" if engine == OFFLINE_ENGINE else "LLM"


def render_detail(
    item: StoredPaper,
    agenda: Agenda | None,
    stale: bool,
    explanation: Explanation | None = None,
    note: str = "",
) -> RenderableType:
    p, a, d = item.paper, item.assessment, item.decision
    out: list[RenderableType] = [Text(p.title, "bold")]
    byline = ", ".join(p.authors[:12]) + (" et al." if len(p.authors) > 12 else "")
    meta = " · ".join(
        x for x in (byline, p.date or str(p.year or ""), p.venue or "", " ".join(p.categories)) if x
    )
    out.append(Text(meta, "italic"))
    links = [
        f"[link=https://arxiv.org/abs/{p.arxiv_id}]arXiv:{escape(p.arxiv_id)}[/link]" if p.arxiv_id else "",
        f"[link=https://doi.org/{p.doi}]doi:{escape(p.doi)}[/link]" if p.doi else "",
        f"[link={escape(p.url)}]{escape(p.url)}[/link]" if p.url and not p.arxiv_id else "",
    ]
    out.append(Text.from_markup("  ".join(x for x in links if x) or "[dim]no link[/dim]"))
    star = " ★ starred" if d.starred else ""
    out.append(
        Text.from_markup(f"[{STATUS_STYLE[d.status]}]{d.status.value}[/]{star}  [dim]{escape(p.id)}[/dim]")
    )
    out.append(Text(""))
    if a is None:
        failed = f" (last attempt failed: {item.failure[1]})" if item.failure else ""
        out.append(Text(f"Not assessed yet{failed}: press e to assess it.", "yellow"))
    else:
        when = a.created_at.strftime("%Y-%m-%d %H:%M")
        engine = a.engine + (f" · {a.model}" if a.model else "")
        if explanation is not None:  # the queue's own score first: what the row shows
            out.append(
                Text("blend  ", "bold magenta")
                + relevance_bar(explanation.score)
                + Text(
                    f"  the queue's order: the {engine_label(a.engine)} with what your decisions taught",
                    "dim",
                )
            )
        label = f"{engine_label(a.engine):<6} "
        line = Text(label, "bold") + relevance_bar(a.relevance) + Text(f"  {engine}, {when}", "dim")
        if stale:
            line += Text("  stale", "bold red") + Text(": the agenda or prompts changed since")
        out.append(line)
        out.append(Text.from_markup(f"[b]summary[/b] {escape(a.summary)}"))
        negative = agenda.negative.name if agenda and agenda.negative else None
        for t in sorted(a.topics, key=lambda t: -t.score):
            style = "red" if t.topic == negative else "bold"
            out.append(
                Text.from_markup(f"  {t.score:>2}/10 [{style}]{escape(t.topic)}[/]: {escape(t.reason)}")
            )
        if explanation is not None:
            lines = explanation.lines()
            out.append(Text.from_markup(f"[b magenta]your decisions[/] {escape(lines[0])}"))
            out.extend(Text(f"  {line}", "magenta") for line in lines[1:])
        elif note:
            out.append(Text.from_markup(f"[b magenta]personal model[/] [dim]{escape(note)}[/]"))
    tags = [*d.tags, *[t for t in (a.tags if a else []) if t not in d.tags]]
    if tags:
        out.append(Text.from_markup("[b]tags[/b] [cyan]" + escape(", ".join(tags)) + "[/]"))
    if d.lists:
        out.append(Text.from_markup("[b]lists[/b] " + escape(", ".join(d.lists))))
    if d.note:
        out.append(Text.from_markup("[b]note[/b] " + escape(d.note)))
    if p.abstract:
        out.extend([Text(""), Text(p.abstract)])
    if p.sources:
        out.append(Text("sources: " + ", ".join(p.sources), "dim"))
    return Group(*out)


class KeyFooter(Static, can_focus=False):
    """The keys of what has the focus, on one line, drawn as Textual's compact Footer draws
    them (and a key clicked is pressed). Textual's Footer builds a widget per key again at
    every change of focus or screen: at 10,000 papers ~30 ms of the 46 that opening the search
    line cost. This is one line of text, made again when the keys shown change."""

    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description", "footer-key--rule"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .footer-key--rule {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.shown: tuple[tuple[str, str, str, bool], ...] = ()  # key, as shown, description, enabled
        self.palette: tuple[str, str, str, bool] | None = None
        self.spans: list[tuple[int, int, str]] = []  # where each key is drawn: start, end, key

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.bindings_changed(self.screen)

    def bindings_changed(self, screen: Any) -> None:
        if screen is not self.screen:
            return
        active = screen.active_bindings
        shown = tuple(
            (b.key, self.app.get_key_display(b), b.description, enabled)
            for _, b, enabled, _ in active.values()
            if b.show
        )
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in active:
            _, b, enabled, _ = active[self.app.COMMAND_PALETTE_BINDING]
            palette = (b.key, self.app.get_key_display(b), b.description, enabled)
        if (shown, palette) != (self.shown, self.palette):
            self.shown, self.palette = shown, palette
            self.refresh()

    def render(self) -> Text:
        key_style = self.get_component_rich_style("footer-key--key")
        description_style = self.get_component_rich_style("footer-key--description")
        line = Text(no_wrap=True, overflow="crop", end="")
        self.spans = []

        def add(key: str, shown: str, description: str, enabled: bool) -> None:
            start = line.cell_len
            line.append(shown, key_style)
            line.append(f" {description}" if description else "", description_style)
            if not enabled:
                line.stylize("dim", start)
            self.spans.append((start, line.cell_len, key))

        def width(item: tuple[str, str, str, bool]) -> int:
            return cell_len(item[1]) + (1 + cell_len(item[2]) if item[2] else 0) + 1

        # On a narrow terminal the palette's key goes first, then whole keys from the end: a
        # key is shown whole or not at all (the help, ?, lists every key).
        keys = list(self.shown)
        room = self.size.width
        palette = self.palette
        if palette is not None and sum(map(width, keys)) + width(palette) > room:
            palette = None
        while keys and sum(map(width, keys)) - 1 > room:
            keys.pop()
        for key, shown, description, enabled in keys:
            add(key, shown, description, enabled)
            line.append(" ")
        if palette is not None:
            key, shown, description, enabled = palette
            line.truncate(max(0, room - width(palette)), pad=True)
            line.append("▏", self.get_component_rich_style("footer-key--rule"))
            add(key, shown, description, enabled)
        return line

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self.spans:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return
