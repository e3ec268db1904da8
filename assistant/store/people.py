"""People sharing one store: each person's decisions, stars, notes, tags and reading lists apart,
the papers, their vectors and assessments shared. No Chroma here.

A person's own values are metadata keys of the paper, as a reading list's membership is: the
store's first person keeps the keys a single-person store always had (`status`, `starred`,
`note`, `user_tags`, `decided_at`, `seed`, `list:<name>`), every other person the same keys
under `d:<name>:` (`d:bob:status`). Chroma's update merges keys, so two people deciding the same
paper at once never overwrite each other; a store made before there were people is the first
person's as it stands, and opening it with this version migrates nothing but one record naming
that person (the one who opened it).

A `View` is one person's window on the store: the rest of the project reads and writes the
plain keys, and the store renames them on the way in and out (`where` filters, metadata read,
metadata written), so that for that person the store looks as a single-person store does.
The first person's view renames nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from assistant.models import Status
from assistant.store.schema import LIST_KEY_PREFIX as LIST_PREFIX
from assistant.store.schema import is_number

# A person's own keys (besides every `list:<name>`); `lists` is the form reading lists had
# before per-list keys (converted at open).
PERSONAL = frozenset({"status", "starred", "note", "user_tags", "decided_at", "seed", "lists"})
PERSON_PREFIX = "d:"
PEOPLE_RECORD = "people"  # the meta collection's record naming the store's people


def personal(key: str) -> bool:
    """Whether a (plain) metadata key is one person's own."""
    return key in PERSONAL or key.startswith(LIST_PREFIX)


def person_key(person: str, key: str) -> str:
    """Where a person other than the store's first keeps a key: `d:<person>:<key>`."""
    return f"{PERSON_PREFIX}{person}:{key}"


def split_key(key: str) -> tuple[str, str] | None:
    """(person, plain key) of a `d:<person>:<key>` key; None for any other key."""
    if not key.startswith(PERSON_PREFIX):
        return None
    person, sep, plain = key[len(PERSON_PREFIX) :].partition(":")
    return (person, plain) if sep and person else None


# A shared reading list (`list create --shared`) is the lab's: its members are marked by a key
# everyone reads, `lab:list:<name>`, beside which `lab:list:<name>:by` names who added the paper.
# Each person sees a shared list's key as `list:<name>`, as their own lists'.
SHARED_PREFIX = "lab:list:"
SHARED_LIST_RECORD = "shared-list"  # a shared list's definition: a named record of this kind
ADDED_BY = ":by"


def shared_key(name: str) -> str:
    return SHARED_PREFIX + name


def added_by_key(name: str) -> str:
    return SHARED_PREFIX + name + ADDED_BY


# An assessment's keys. Assessments are kept per agenda (by its hash): those of the store's
# plain agenda (the first one assessed with; another replaces it once nobody's agenda is it any
# more, as when the one person of a store edits theirs) in the plain keys, any other agenda's
# under `a:<hash>:` (`a:3f2c...:relevance`), so that two agendas never overwrite each other.
ASSESSED = frozenset(
    {"assessment", "relevance", "assessed_key", "engine", "tags", "failed", "failed_key", "failed_reason"}
)
AGENDA_PREFIX = "a:"
# When a paper was last written (`touched`): what every refresh and "changed since" reads. A
# write of another agenda's assessment alone (`triage tag` with a second agenda: 100k papers)
# is stamped under that agenda, `a:<hash>:touched`, so that only the readers of that agenda
# read those papers again, not every person's review UI and `daily`.
STAMP = "touched"


def agenda_key(agenda: str, key: str) -> str:
    return f"{AGENDA_PREFIX}{agenda}:{key}"


def stamp_key(key: str) -> bool:
    """Whether a stored key is a paper's stamp: `touched`, or an agenda's `a:<hash>:touched`."""
    return key == STAMP or (key.startswith(AGENDA_PREFIX) and key.endswith(":" + STAMP))


@dataclass(frozen=True)
class View:
    """One person's window on the store's papers (see the module's docstring)."""

    person: str
    first: bool  # the store's first person: their keys are the plain ones
    shared: frozenset[str] = frozenset()  # the names of the store's shared reading lists
    slot: str | None = None  # the agenda whose assessments are under `a:<slot>:` (None: plain)

    @property
    def plain(self) -> bool:
        """Whether this view renames nothing."""
        return self.first and not self.shared and self.slot is None

    @property
    def tag(self) -> str:
        """What a cache of this person's derived state adds to its name: "" for the first person
        with the plain agenda, whose caches keep the names they had before there were people."""
        return self.person_tag + (f"%{self.slot}" if self.slot is not None else "")

    @property
    def person_tag(self) -> str:
        """The same for what is this person's whatever their agenda ("" for the first person)."""
        return "" if self.first else f"@{self.person}"

    @property
    def list_record(self) -> str:
        """The kind of named record this person's own reading lists are defined by."""
        return "reading-list" if self.first else f"reading-list@{self.person}"

    def key(self, key: str) -> str:
        if self.slot is not None and key in ASSESSED:
            return agenda_key(self.slot, key)
        if self.shared and key.startswith(LIST_PREFIX) and key[len(LIST_PREFIX) :] in self.shared:
            return shared_key(key[len(LIST_PREFIX) :])
        return person_key(self.person, key) if not self.first and personal(key) else key

    def where(self, where: dict[str, Any] | None) -> dict[str, Any] | None:
        """A filter on plain keys as a filter on the stored ones (a test of `touched` tests this
        agenda's stamp too)."""
        if where is None or self.plain:
            return where
        renamed = _rename_where(where, self.key)
        return renamed if self.slot is None else _either_stamp(renamed, agenda_key(self.slot, STAMP))

    def written(self, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        """Metadata to write, its plain keys renamed to the stored ones (a paper put in a shared
        list is marked as added by this person; a write of this agenda's assessment alone is
        stamped under the agenda)."""
        if meta is None or self.plain:
            return meta
        assessing = (
            self.slot is not None
            and any(k in ASSESSED for k in meta)
            and all(k in ASSESSED or k == STAMP for k in meta)
        )
        out: dict[str, Any] = {}
        for k, v in meta.items():
            stored = self.key(k) if not (assessing and k == STAMP) else agenda_key(str(self.slot), STAMP)
            out[stored] = v
            if stored.startswith(SHARED_PREFIX):
                out[stored + ADDED_BY] = self.person if v else None
        return out

    def read(self, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        """Stored metadata as this person sees it: their own keys plain, nobody else's, and the
        shared lists' membership as their own lists'."""
        if meta is None or self.plain:
            return meta
        mine = person_key(self.person, "")
        slot = agenda_key(self.slot, "") if self.slot is not None else None
        assessed: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for k, v in meta.items():
            if k.startswith(PERSON_PREFIX):
                if k.startswith(mine):
                    out[k[len(mine) :]] = v
            elif k.startswith(AGENDA_PREFIX):
                if slot is not None and k.startswith(slot):
                    assessed[k[len(slot) :]] = v
            elif k.startswith(SHARED_PREFIX):
                out[k] = v
                name = k[len(SHARED_PREFIX) :]
                if name in self.shared:
                    out[LIST_PREFIX + name] = v
            elif self.first or not personal(k):
                out[k] = v
        if slot is not None:
            # This agenda's own assessment only, as filters on its keys see it: a paper it has
            # not assessed yet is unassessed (`triage tag` assesses it).
            for k in ASSESSED:
                out.pop(k, None)
            candidates: list[Any] = [out.get(STAMP), assessed.pop(STAMP, None)]
            stamps = [float(s) for s in candidates if is_number(s)]
            out.update(assessed)
            if stamps:
                out[STAMP] = max(stamps)  # written last by anyone, or for this agenda
        return out

    def read_all(self, metas: Iterable[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
        return [self.read(m) for m in metas]


def _either_stamp(where: dict[str, Any], other: str) -> dict[str, Any]:
    """A filter with each "written since" test of `touched` (`$gt`, `$gte`) made a test of
    `touched` or of `other` (this agenda's stamp): as a reader sees the later of the two."""
    out: dict[str, Any] = {}
    for k, v in where.items():
        if k in ("$and", "$or") and isinstance(v, list):
            out[k] = [_either_stamp(w, other) if isinstance(w, dict) else w for w in v]
        else:
            out[k] = v
    clause = out.get(STAMP)
    if not (isinstance(clause, dict) and clause and set(clause) <= {"$gt", "$gte"}):
        return out  # only "written since" is asked of both stamps (the later of them is read)
    either = {"$or": [{STAMP: out[STAMP]}, {other: out.pop(STAMP)}]}
    return {"$and": [either, *({k: v} for k, v in out.items())]} if out else either


def _rename_where(where: dict[str, Any], rename: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in where.items():
        if k in ("$and", "$or") and isinstance(v, list):
            out[k] = [_rename_where(w, rename) if isinstance(w, dict) else w for w in v]
        elif k == "status":
            out[rename(k)] = _status_test(v)
        else:
            out[rename(k)] = v
    return out


STATUSES = tuple(s.value for s in Status)


def _status_test(value: Any) -> Any:
    """A test of the status as a test of a person's own status key, which a paper they never
    decided lacks (a new paper), where the first person's plain key says "new"."""
    if isinstance(value, dict) and len(value) == 1:
        op, operand = next(iter(value.items()))
    else:
        op, operand = "$eq", value
    operands = operand if isinstance(operand, list) else [operand]
    if op in ("$eq", "$in"):
        matched = {o for o in operands if o in STATUSES}
    elif op in ("$ne", "$nin"):
        matched = set(STATUSES) - set(operands)
    else:
        return value
    if Status.NEW.value not in matched:
        return {"$in": sorted(matched)} if matched else {"$in": ["-"]}
    others = sorted(set(STATUSES) - matched)
    return {"$nin": others or ["-"]}


def not_mine(meta: dict[str, Any], view: View) -> dict[str, dict[str, Any]]:
    """The keys of a paper's stored metadata that are other people's decisions or other
    agendas' assessments (what this person's view of the paper leaves out), by whose they are:
    {"d:<person>" or "a:<agenda>" or "plain decision" or "plain assessment": {key: value}}."""
    mine = (person_key(view.person, ""), agenda_key(view.slot, "") if view.slot is not None else "\0")
    out: dict[str, dict[str, Any]] = {}
    for k, v in meta.items():
        if k.startswith((PERSON_PREFIX, AGENDA_PREFIX)) and not k.startswith(mine):
            group = ":".join(k.split(":", 2)[:2])
        elif not view.first and personal(k):  # the first person's plain keys
            group = "plain decision"
        elif view.slot is not None and k in ASSESSED:  # the plain agenda's assessment
            group = "plain assessment"
        else:
            continue
        out.setdefault(group, {})[k] = v
    return out


def holds_something(values: dict[str, Any]) -> bool:
    """Whether a group of keys (`not_mine`) holds a decision or an assessment: a status other
    than new, a star, a note, tags, a list, an assessment or a recorded failure."""
    for k, v in values.items():
        plain = k.rsplit(":", 1)[-1] if k.startswith((PERSON_PREFIX, AGENDA_PREFIX)) else k
        if plain == "status" and v not in (None, Status.NEW.value):
            return True
        held = plain in ("starred", "note", "user_tags", "assessment", "failed_key")
        if held and v is not None and v is not False and v != "":
            return True
        if (":list:" in k or k.startswith(LIST_PREFIX)) and v:
            return True
    return False


def everyone(meta: dict[str, Any], first: str) -> dict[str, dict[str, Any]]:
    """Every person's own keys in a paper's stored metadata: {person: {plain key: value}} (the
    first person's from the plain keys)."""
    out: dict[str, dict[str, Any]] = {}
    for k, v in meta.items():
        if v is None:
            continue
        split = split_key(k)
        if split is not None:
            out.setdefault(split[0], {})[split[1]] = v
        elif personal(k):
            out.setdefault(first, {})[k] = v
    return out


PLAIN = View(person="", first=True)  # the stored keys as they are (a migration, the lab's views)
