"""Chroma's `where` filter, evaluated as Chroma does, and the part of it the mirror's index
answers.

`matcher` tests one record's metadata: `$ne` and `$nin` match a record without the key, a
boolean matches only a boolean, an int may equal a float, a list value is looked into by
`$contains` only (equality, `$in` and comparisons never match it: Chroma 1.5 compares scalars).

The mirror keeps an index of a few keys' values (`INDEXED`, and every reading list's key
`list:<name>`): each string or boolean value as a term (`term`). A filter's equalities on
those keys (`{"status": "accepted"}`, `$in`, `$and`, `$or` of them) are answered by the index
alone (`lookups`); any other filter is evaluated record by record, on the records the index
narrows it to when it can.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assistant.store.people import SHARED_PREFIX, split_key
from assistant.store.schema import LIST_KEY_PREFIX as LIST_PREFIX
from assistant.store.schema import is_number

# Keys whose values the mirror indexes (besides every `list:<name>`): those the daily loop's
# commands filter on.
INDEXED = frozenset({"status", "starred", "seed"})


def indexed(key: str) -> bool:
    """Whether the index keeps a key's values: those of `INDEXED` and reading lists, a person's
    own (`d:<person>:status`, `assistant.store.people`) as the first person's."""
    split = split_key(key)
    if split is not None:
        key = split[1]
    return key in INDEXED or key.startswith(LIST_PREFIX) or key.startswith(SHARED_PREFIX)


def term(value: Any) -> str | None:
    """A value as the index keeps it (typed: `True` and `"True"` are two terms), or None for a
    value it does not keep (numbers: an int equals a float in Chroma's eyes)."""
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, str):
        return "s" + value
    return None


def terms(meta: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The (key, term) pairs of a record's metadata the index keeps (a list value has none:
    equality never matches it)."""
    out: list[tuple[str, str]] = []
    for key, value in (meta or {}).items():
        if indexed(key):
            t = term(value)
            if t is not None:
                out.append((key, t))
    return out


# A lookup: the records having any of these (key, term) pairs, or a combination of lookups.
Lookup = tuple[str, Any]


def lookups(where: dict[str, Any]) -> Lookup | None:
    """The filter as index lookups when the index answers it exactly: ("any", [(key, term)...]),
    ("and", [lookup...]) or ("or", [lookup...]); None when it does not."""
    parts: list[Lookup] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                return None
            inner = [lookups(w) if isinstance(w, dict) else None for w in value]
            if any(i is None for i in inner):
                return None
            parts.append(("and" if key == "$and" else "or", inner))
            continue
        if not indexed(key):
            return None
        if isinstance(value, dict):
            if len(value) != 1:
                return None
            op, operand = next(iter(value.items()))
            if op == "$eq":
                operands = [operand]
            elif op == "$in" and isinstance(operand, list) and operand:
                operands = list(operand)
            else:
                return None
        else:
            operands = [value]
        wanted = [term(o) for o in operands]
        if any(t is None for t in wanted):
            return None
        parts.append(("any", [(key, t) for t in wanted]))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ("and", parts)


def narrowing(where: dict[str, Any]) -> Lookup | None:
    """Index lookups whose records include every record the filter matches (those of its
    top-level equalities on indexed keys, and of `$and` parts that are such); None when the
    filter leaves the index nothing to narrow by."""
    exact = lookups(where)
    if exact is not None:
        return exact
    parts: list[Lookup] = []
    for key, value in where.items():
        if key == "$and" and isinstance(value, list):
            parts += [n for w in value if isinstance(w, dict) and (n := narrowing(w)) is not None]
        elif not key.startswith("$"):
            found = lookups({key: value})
            if found is not None:
                parts.append(found)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ("and", parts)


def matcher(where: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """A test of a record's metadata that agrees with Chroma's `where` filter."""
    tests = [_clause(key, value) for key, value in where.items()]
    return lambda meta: all(t(meta) for t in tests)


def _clause(key: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    if key == "$and":
        parts = [matcher(w) for w in value]
        return lambda meta: all(p(meta) for p in parts)
    if key == "$or":
        parts = [matcher(w) for w in value]
        return lambda meta: any(p(meta) for p in parts)
    if isinstance(value, dict):
        tests = [_operator(key, op, operand) for op, operand in value.items()]
        return lambda meta: all(t(meta) for t in tests)
    return _operator(key, "$eq", value)


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Equal as Chroma compares: a boolean equals only a boolean; an int may equal a float."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) != isinstance(b, str):
        return False
    return bool(a == b)


def _operator(key: str, op: str, operand: Any) -> Callable[[dict[str, Any]], bool]:
    def get(meta: dict[str, Any]) -> Any:
        return meta.get(key, _MISSING)

    if op == "$eq":
        return lambda meta: _equal(get(meta), operand)
    if op == "$ne":
        return lambda meta: (v := get(meta)) is _MISSING or not _equal(v, operand)
    if op == "$in":
        return lambda meta: any(_equal(get(meta), o) for o in operand)
    if op == "$nin":
        return lambda meta: (v := get(meta)) is _MISSING or not any(_equal(v, o) for o in operand)
    if op == "$contains":
        return lambda meta: isinstance(v := get(meta), list) and any(_same(x, operand) for x in v)
    if op == "$not_contains":
        return lambda meta: not (isinstance(v := get(meta), list) and any(_same(x, operand) for x in v))
    compare = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }.get(op)
    if compare is None:
        raise ValueError(f"the mirror does not evaluate {op!r}")
    return lambda meta: is_number(v := get(meta)) and is_number(operand) and bool(compare(v, operand))


def _equal(value: Any, operand: Any) -> bool:
    if value is _MISSING:
        return False
    if isinstance(value, list):  # Chroma 1.5 compares scalars only: `$contains` looks into lists
        return False
    return _same(value, operand)
