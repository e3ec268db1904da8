"""JSON read to a bound: at most N entries of an answer's list and a cap on its values in all,
so a provider that sends a million papers costs what the first thousand do."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from assistant.web.messages import JSON_DEPTH, JSON_VALUES, FetchError, address, body_excerpt, is_html

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WORDS = (("true", True), ("false", False), ("null", None))
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class BoundedJson:
    """A JSON reader that stops where a bound is reached instead of building whatever the
    server sent: lists at the top or one level down keep `items` entries at most, and no more
    than `values` values are read in all. What stops short drops the entry it was in (never a
    half-read paper) and says so in `cut`."""

    def __init__(self, text: str, items: int | None, values: int = JSON_VALUES) -> None:
        self.text = text
        self.items = items
        self.values = values
        self.count = 0
        self.cut = False

    def _ws(self, i: int) -> int:
        match = _WS.match(self.text, i)
        return match.end() if match else i

    def _fail(self, what: str, i: int) -> ValueError:
        return ValueError(f"{what}: char {i}")

    def read(self) -> Any:
        value, end, whole = self._value(0, 0)
        if whole and self._ws(end) != len(self.text):
            raise self._fail("Extra data", end)
        self.cut = self.cut or not whole
        return value

    def _value(self, i: int, depth: int) -> tuple[Any, int, bool]:
        """(value, where it ends, whether it was read whole)."""
        s = self.text
        i = self._ws(i)
        if i >= len(s):
            raise self._fail("Expecting value", i)
        self.count += 1
        if self.count > self.values:
            return None, i, False
        c = s[i]
        if c == '"':
            text, end = _scanstring(s, i + 1)
            return text, end, True
        if c in "[{":
            if depth >= JSON_DEPTH:
                raise self._fail("Nested too deeply", i)
            return self._array(i + 1, depth + 1) if c == "[" else self._object(i + 1, depth + 1)
        number = _NUMBER.match(s, i)
        if number:
            text = number.group()
            return (float(text) if number.group(1) or number.group(2) else int(text)), number.end(), True
        for word, value in _WORDS:
            if s.startswith(word, i):
                return value, i + len(word), True
        raise self._fail("Expecting value", i)

    def _array(self, i: int, depth: int) -> tuple[list[Any], int, bool]:
        s, out = self.text, list[Any]()
        i = self._ws(i)
        if s.startswith("]", i):
            return out, i + 1, True
        limit = self.items if depth <= 2 else None
        while True:
            if limit is not None and len(out) >= limit:
                self.cut = True
                return out, i, False
            value, i, whole = self._value(i, depth)
            if not whole:
                return out, i, False  # the entry read in part is left out
            out.append(value)
            i = self._ws(i)
            if s.startswith(",", i):
                i += 1
            elif s.startswith("]", i):
                return out, i + 1, True
            else:
                raise self._fail("Expecting ',' delimiter", i)

    def _object(self, i: int, depth: int) -> tuple[dict[str, Any], int, bool]:
        s, out = self.text, dict[str, Any]()
        i = self._ws(i)
        if s.startswith("}", i):
            return out, i + 1, True
        while True:
            i = self._ws(i)
            if not s.startswith('"', i):
                raise self._fail("Expecting property name enclosed in double quotes", i)
            key, i = _scanstring(s, i + 1)
            i = self._ws(i)
            if not s.startswith(":", i):
                raise self._fail("Expecting ':' delimiter", i)
            value, i, whole = self._value(i + 1, depth)
            if not whole:
                if isinstance(value, list | dict):
                    out[key] = value  # a list cut to its first entries
                return out, i, False
            out[key] = value
            i = self._ws(i)
            if s.startswith(",", i):
                i += 1
            elif s.startswith("}", i):
                return out, i + 1, True
            else:
                raise self._fail("Expecting ',' delimiter", i)


def read_json(name: str, response: httpx.Response, items: int | None = None) -> tuple[Any, bool]:
    """The response's JSON, its list cut to `items` entries and the whole to `JSON_VALUES`
    values, and whether anything was left out; a FetchError if it is not JSON."""
    content = response.content
    try:
        text = content.decode(json.detect_encoding(content), "surrogatepass")
        reader = BoundedJson(text, items)
        return reader.read(), reader.cut
    except (ValueError, RecursionError) as exc:
        if is_html(response):
            raise FetchError(
                f"{name} sent a response that is not JSON (an HTML page) from {address(response.url)}"
            ) from None
        said = body_excerpt(response, 80)
        raise FetchError(
            f"{name} sent a response that is not JSON ({str(exc).split(':')[0]}) from "
            f"{address(response.url)}" + (f": {said!r}" if said else "")
        ) from None


def json_of(name: str, response: httpx.Response) -> Any:
    """The response's JSON (to `JSON_VALUES` values), or a FetchError saying the provider
    sent something else."""
    return read_json(name, response)[0]
