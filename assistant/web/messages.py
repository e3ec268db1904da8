"""What a provider's answer says, in one line a user can act on: the address without its
query, sizes and waits in words, an error page's message without its markup, Retry-After."""

from __future__ import annotations

import errno
import json
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from assistant import __version__
from assistant.errors import TriageError

USER_AGENT = f"paper-triage/{__version__}"
EXCERPT = 150  # characters of an error body an error message quotes at most
MB = 1024 * 1024
DEADLINE = 30.0  # seconds one request may take in all, retries and waits included
MAX_BYTES = 50 * MB  # the largest body read, after decompression
JSON_VALUES = 1_000_000  # values one JSON answer is read to at most (~100 MB as Python objects)
JSON_DEPTH = 200
SNIFF = 4096  # bytes of a body looked at to tell a web page or quote an error
_MARKUP = re.compile(r"<[!/?A-Za-z][^<>]*>")
_JSON_MESSAGE = ("message", "error", "detail", "error_description")  # S2, HF, FastAPI, OAuth


class FetchError(TriageError):
    """A provider could not be reached, refused the request or sent something unreadable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a refused request


def address(url: httpx.URL) -> str:
    """A URL as an error shows it: no query or fragment (long, and where private feeds keep
    their tokens), no user name or password."""
    return str(url.copy_with(query=None, fragment=None, userinfo=b""))


def host(url: httpx.URL) -> str:
    """`host` or `host:port` of a URL, as a size or deadline error names the server."""
    return url.netloc.decode("ascii", "replace") or str(url)


def size_words(count: float) -> str:
    """50 MB, 1.5 MB, 300 kB."""
    if count >= MB:
        whole = count >= 10 * MB or count % MB == 0
        return f"{count / MB:.0f} MB" if whole else f"{count / MB:.1f} MB"
    return f"{max(count / 1024, 1):.0f} kB"


def wait_words(seconds: float) -> str:
    """A wait as a message says it: `45s`, `3600s (60 min)`, and never more than `more than an
    hour` (a Retry-After of 1e308 is not a 309-digit number of seconds)."""
    if not seconds <= 3600:  # NaN and infinity too
        return "more than an hour"
    return f"{seconds:.0f}s" + (f" ({seconds / 60:.0f} min)" if seconds >= 120 else "")


def _head_text(response: httpx.Response, limit: int = SNIFF) -> str:
    """The first `limit` bytes of the body as text (a large body is never decoded whole)."""
    return response.content[:limit].decode(response.encoding or "utf-8", errors="replace")


def is_html(response: httpx.Response) -> bool:
    """Whether the body is a web page (or other markup): by its type, or by its first
    characters when the server sent no type."""
    kind = response.headers.get("Content-Type", "").lower()
    if "html" in kind:
        return True
    return response.content[:SNIFF].lstrip()[:1] == b"<" and bool(_MARKUP.search(_head_text(response, 2000)))


def _json_message(data: Any) -> str | None:
    """The message of a JSON error body: `{"message": ...}`, `{"error": ...}` (Semantic
    Scholar, Hugging Face), `{"detail": ...}`, or one of those nested (`{"error": {"message": ...}}`)."""
    if not isinstance(data, dict):
        return None
    for key in _JSON_MESSAGE:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, dict) and (nested := _json_message(value)):
            return nested
    return None


def body_excerpt(response: httpx.Response, limit: int = EXCERPT) -> str:
    """What an error response says, as at most `limit` characters of plain text on one line: a
    JSON API's message, else the start of a plain-text body; nothing for a web page, XML or
    binary, whose markup or bytes would only drown the error."""
    kind = response.headers.get("Content-Type", "").lower()
    if is_html(response) or "xml" in kind or (kind and not kind.startswith("text/") and "json" not in kind):
        return ""
    text = _head_text(response, 16 * SNIFF)
    try:
        message = _json_message(json.loads(text))
    except ValueError:
        message = None
    text = " ".join((message or text).split())
    if not text or _MARKUP.search(text) or not text.isprintable():
        return ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def http_failure(response: httpx.Response) -> str:
    """`HTTP 404 Not Found from https://host/path`, and what the server said if it is short
    plain text or a JSON message."""
    code = response.status_code
    reason = httpx.codes.get_reason_phrase(code) or response.reason_phrase
    said = body_excerpt(response)
    return f"HTTP {code} {reason}".rstrip() + f" from {address(response.url)}" + (f": {said}" if said else "")


def refused(exc: BaseException) -> bool:
    """Whether a transport error is a refused connection (httpx wraps the OSError twice)."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain is short; a cycle must not loop
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or getattr(seen, "errno", None) == errno.ECONNREFUSED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
