"""`@string` macros and `#` concatenation resolved to one value per field, within the caps
(`limits.EXPANDED` a value, `EXPANDED_FILE` a file): a doubling chain costs a note, not memory."""

from __future__ import annotations

import re
from typing import Any

from bibtexparser.library import Library
from bibtexparser.middlewares.middleware import LibraryMiddleware
from bibtexparser.model import Entry

from assistant.ingest import limits
from assistant.ingest.bibmacros import Budget


class ResolveStrings(LibraryMiddleware):
    """`@string` macros and `#` concatenation (`JdK # " and Williams"`) resolved to one value.

    bibtexparser's own middleware replaces a value that is a single macro; a concatenation
    would stay a literal `JdK # "...` that every export repeated. Unknown macros (the month
    names) stay as their names. A value never expands beyond `limits.EXPANDED` characters (a
    chain of @strings that doubles would reach terabytes): it is cut there, with a note; once
    the file's expansions reach `budget.file_left` characters, @strings stay as their names."""

    @classmethod
    def metadata_key(cls) -> str:
        return "triage_resolve_strings"

    def __init__(self, budget: Budget | None = None) -> None:
        super().__init__()
        self.strings: dict[str, str] = {}  # the file's @string values, for entries read later
        self.budget = Budget() if budget is None else budget  # shared with the file's macros
        self.notes: list[tuple[int | None, str]] = []  # (line, what was cut) for the file's notes
        self.cut: set[str] = set()  # the @strings cut to the cap
        self.spent = False  # the file's expansion budget ran out

    def transform(self, library: Library) -> Library:
        strings = self.strings
        for block in library.strings:
            key = block.key.lower()
            strings[key] = self.resolve(str(block.value), strings, braced=False, what=("string", key, block))
            block.value = strings[key]
        for entry in library.entries:
            for field in entry.fields:
                if isinstance(field.value, str):
                    field.value = self.resolve(
                        field.value, strings, braced=True, what=("field", field.key, entry)
                    )
        return library

    def resolve(
        self, value: str, strings: dict[str, str], braced: bool, what: tuple[str, str, Any] | None = None
    ) -> str:
        """A raw value with its @strings in place (`what`: kind, name and block, for a note)."""
        parts = concatenated(value)
        if parts is None:
            return value
        if braced and len(parts) == 1 and parts[0][0] == "literal":
            return value
        pieces: list[str] = []
        room, inherited, over = limits.EXPANDED, False, False
        for kind, part in parts:
            text = part
            if kind == "macro" and part.lower() in strings:
                known = strings[part.lower()]
                if min(len(known), room) > self.budget.file_left:
                    self._spend(part, what)
                else:
                    text = known
                    self.budget.file_left -= min(len(known), room)
                    inherited = inherited or part.lower() in self.cut
            if len(text) > room:
                pieces.append(text[:room])
                over = True
                break
            pieces.append(text)
            room -= len(text)
        text = "".join(pieces)
        if over and what is not None:
            self._cut(what, inherited)
        return "{" + text + "}" if braced else text

    def _cut(self, what: tuple[str, str, Any], inherited: bool) -> None:
        kind, name, block = what
        beyond = f"expands beyond {limits.EXPANDED:,} characters; cut"
        if kind == "string":
            self.cut.add(name)
            if not inherited:  # a chain of @strings is said once, at its first one cut
                self.notes.append((line_of(block), f"the @string '{name}' {beyond}"))
        else:
            self.notes.append((line_of(block), f"{entry_label(block)}: '{name}' {beyond}"))

    def _spend(self, name: str, what: tuple[str, str, Any] | None) -> None:
        if self.spent:
            return
        self.spent = True
        line = line_of(what[2]) if what is not None else None
        self.notes.append(
            (
                line,
                f"the file's @strings expand beyond {limits.EXPANDED_FILE:,} characters in all: "
                f"'{name}' and those after it are left as their names",
            )
        )


_DELIMITERS = re.compile(r'[{}"]')
_BARE_TOKEN = re.compile(r'[^\s#{}"]+')
_SPACES = re.compile(r"\s*")


def concatenated(value: str) -> list[tuple[str, str]] | None:
    """The parts of a raw field value (`{...}`, `"..."`, numbers and macros joined by `#`);
    None if it is not such a value."""
    parts: list[tuple[str, str]] = []
    i, n = 0, len(value)
    while i < n:
        i = _SPACES.match(value, i).end()  # type: ignore[union-attr]  # it matches the empty string
        if i >= n:
            break
        ch = value[i]
        if ch in '{"':
            # Only the delimiters are visited: a value of megabytes has few of them.
            depth, end = 0, None
            for m in _DELIMITERS.finditer(value, i if ch == "{" else i + 1):
                c = m.group()
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0 and ch == "{":
                        end = m.start()
                        break
                elif depth == 0 and ch == '"':
                    end = m.start()
                    break
            if end is None:
                return None
            parts.append(("literal", value[i + 1 : end]))
            i = end + 1
        else:
            bare = _BARE_TOKEN.match(value, i)
            if not bare:
                return None
            token = bare.group()
            parts.append(("literal" if token.isdigit() else "macro", token))
            i += len(token)
        i = _SPACES.match(value, i).end()  # type: ignore[union-attr]
        if i < n:
            if value[i] != "#":
                return None
            i += 1
    return parts or None


def entry_label(entry: Entry) -> str:
    return f"@{entry.entry_type}{{{entry.key}}}"


def line_of(block: Any) -> int | None:
    line = getattr(block, "start_line", None)
    return line + 1 if isinstance(line, int) else None
