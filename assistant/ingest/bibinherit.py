"""What a biblatex entry takes from its `crossref` parent and its `xdata` sources, by biber's
rules (a parent's title becomes the child's booktitle, maintitle or journaltitle)."""

from __future__ import annotations

from typing import Any

from bibtexparser.model import Entry

# Fields an entry does not take from its `crossref` parent or `xdata` (biblatex's rules).
_NOT_INHERITED = frozenset(
    "ids crossref xref xdata entryset entrysubtype execute label options presort related relatedoptions "
    "relatedstring relatedtype shorthand shorthandintro sortkey".split()
)
_BOOK_PARTS = {
    "book": ("inbook", "bookinbook", "suppbook"),
    "collection": ("incollection", "inreference", "suppcollection"),
    "reference": ("incollection", "inreference", "suppcollection"),
    "proceedings": ("inproceedings",),
}


def _renamed(parent_kind: str, child_kind: str) -> dict[str, str | None]:
    """How a parent's title fields arrive in its child, as biber does it (None: not at all)."""
    child_kind = "inproceedings" if child_kind == "conference" else child_kind
    if parent_kind.startswith("mv"):
        target = "main"
    elif child_kind in _BOOK_PARTS.get(parent_kind, ()):
        target = "book"
    elif parent_kind == "periodical" and child_kind in ("article", "suppperiodical"):
        target = "journal"
    else:
        return {}
    return {
        "title": f"{target}title",
        "subtitle": f"{target}subtitle",
        "titleaddon": f"{target}titleaddon",
        "shorttitle": None,
        "sorttitle": None,
        "indextitle": None,
        "indexsorttitle": None,
    }


def _inherit(child: dict[str, Any], parent: dict[str, Any], renamed: dict[str, str | None]) -> None:
    """Fill `child`'s missing fields from `parent` (field names lower case). A field the parent
    names itself (a BibTeX-style `booktitle` on a `@proceedings`) comes before a renamed one."""
    dated = "date" in child or "year" in child
    for name in sorted(parent, key=lambda n: n in renamed):
        value, target = parent[name], renamed.get(name, name)
        if target is None or target in _NOT_INHERITED or target in child:
            continue
        if dated and target in ("date", "year", "month"):
            continue  # a child's own date is not mixed with its parent's
        child[target] = value


class Entries:
    """The entries of a file with what they inherit: `xdata` first, then `crossref` (as biber:
    an `@inproceedings` without a booktitle takes its `@proceedings`' title, year, publisher,
    editor). `xref` names a parent but passes nothing on."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.raw = [{k.lower(): f.value for k, f in e.fields_dict.items()} for e in entries]
        self.keys: dict[str, int] = {}  # a key named twice: the first entry is the parent (BibTeX)
        self.folded: dict[str, int] = {}
        for i, entry in enumerate(entries):
            self.keys.setdefault(entry.key, i)
            self.folded.setdefault(entry.key.lower(), i)
        self.done: dict[int, dict[str, Any]] = {}

    def _index(self, key: str) -> int | None:
        key = key.strip()
        return self.keys.get(key, self.folded.get(key.lower())) if key else None

    def fields(self, i: int, seen: frozenset[int] = frozenset()) -> dict[str, Any]:
        """The fields of the `i`th entry with what it inherits (names lower case)."""
        if i in self.done:
            return self.done[i]
        fields = dict(self.raw[i])
        seen = seen | {i}
        for ref in str(fields.get("xdata", "")).split(","):
            source = self._index(ref)
            if source is not None and source not in seen:
                _inherit(fields, self.fields(source, seen), {})
        parent = self._index(str(fields.get("crossref", "")))
        if parent is not None and parent not in seen:
            kinds = self.entries[parent].entry_type.lower(), self.entries[i].entry_type.lower()
            _inherit(fields, self.fields(parent, seen), _renamed(*kinds))
        self.done[i] = fields
        return fields
