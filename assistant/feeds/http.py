"""A polite HTTP client: a minimum delay between requests to one provider, retries of 429 and
5xx with exponential backoff honouring Retry-After (tenacity), and one-line errors.

One client per provider is shared by every feed of a run, so two arXiv feeds still make one
request every 3 seconds between them.

An error says what failed in one line a user can act on: the status and its reason, the
address (without its query, where private feeds keep their tokens) and, from a JSON API, its
message. An error page's HTML is never quoted: its markup would drown that line, in `triage
fetch` and in `feed ls` alike. A refused connection is not retried: nothing listens at the
address, and backing off for 15 s would not change that.
"""

from __future__ import annotations

import errno
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from assistant import __version__
from assistant.errors import TriageError

USER_AGENT = f"paper-triage/{__version__}"
EXCERPT = 150  # characters of an error body an error message quotes at most
_MARKUP = re.compile(r"<[!/?A-Za-z][^<>]*>")
_JSON_MESSAGE = ("message", "error", "detail", "error_description")  # S2, HF, FastAPI, OAuth


class FetchError(TriageError):
    """A provider could not be reached, refused the request or sent something unreadable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a refused request


class _Retry(Exception):
    """A failed attempt worth repeating: a 429, a 5xx or a network error (not a refused
    connection); `reason` is what the error says if it is the last."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status


def address(url: httpx.URL) -> str:
    """A URL as an error shows it: no query or fragment (long, and where private feeds keep
    their tokens), no user name or password."""
    return str(url.copy_with(query=None, fragment=None, userinfo=b""))


def is_html(response: httpx.Response) -> bool:
    """Whether the body is a web page (or other markup): by its type, or by its first
    characters when the server sent no type."""
    kind = response.headers.get("Content-Type", "").lower()
    if "html" in kind:
        return True
    return response.content.lstrip()[:1] == b"<" and bool(_MARKUP.search(response.text[:2000]))


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
    text = response.text
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


def _refused(exc: BaseException) -> bool:
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


@dataclass
class PoliteClient:
    """HTTP for one provider: `delay` seconds between requests, `retries` retries of 429/5xx and
    network errors (backoff `delay * 2^attempt`, or Retry-After when the server says), and a
    Retry-After over `max_wait` ends the request instead of stalling the run."""

    name: str
    delay: float = 1.0
    retries: int = 4
    timeout: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict)
    hint: str = ""
    max_wait: float = 600.0
    sleep: Callable[[float], None] = time.sleep
    requests: int = 0
    waited: float = 0.0  # seconds spent in the provider's enforced waits (delay and Retry-After)
    _last: float = 0.0
    _client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=self.timeout,
                headers={"User-Agent": USER_AGENT, **self.headers},
                follow_redirects=True,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _pause(self, seconds: float) -> None:
        if seconds > 0:
            self.waited += seconds
            self.sleep(seconds)

    def _backoff(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        attempt = state.attempt_number - 1
        if isinstance(exc, _Retry) and exc.retry_after is not None:
            return max(exc.retry_after, self.delay)
        return self.delay * 2.0**attempt if self.delay else 0.0

    def _attempt(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        self._pause(self._last + self.delay - time.monotonic())
        self._last = time.monotonic()
        self.requests += 1
        try:
            response = self._http().request(method, url, **kwargs)
        except httpx.ConnectError as exc:
            if _refused(exc):
                where = exc.request.url
                port = where.port or {"https": 443, "http": 80}.get(where.scheme)
                raise FetchError(
                    f"cannot reach {self.name} (cannot connect to {where.host}:{port}: connection "
                    f"refused): is the address right, or are you offline?{self.hint}"
                ) from None
            raise _Retry(type(exc).__name__) from exc
        except httpx.TransportError as exc:
            raise _Retry(type(exc).__name__) from exc
        if response.status_code == 429 or response.status_code >= 500:
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            if wait is not None and wait > self.max_wait:
                raise FetchError(
                    f"{self.name} asks to wait {wait:.0f}s before the next request (HTTP "
                    f"{response.status_code}); try again later"
                )
            raise _Retry(http_failure(response), wait, response.status_code)
        return response

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The response (2xx, 3xx such as 304, or 4xx other than 429 raise FetchError)."""
        retrying = Retrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=self._backoff,
            retry=retry_if_exception_type(_Retry),
            sleep=self._pause,
            reraise=True,
        )
        try:
            response: httpx.Response = retrying(
                self._attempt, method, url, params=params, json=json, headers=headers
            )
        except _Retry as exc:
            if exc.status is None:
                raise FetchError(
                    f"cannot reach {self.name} at {url} ({exc}); are you offline?{self.hint}"
                ) from None
            raise FetchError(f"{self.name} kept answering {exc}; try again later", exc.status) from None
        if response.status_code >= 400:
            raise FetchError(http_failure(response), response.status_code)
        return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def get_json(self, url: str, **kwargs: Any) -> Any:
        return json_of(self.name, self.get(url, **kwargs))

    def post_json(self, url: str, **kwargs: Any) -> Any:
        return json_of(self.name, self.post(url, **kwargs))


def json_of(name: str, response: httpx.Response) -> Any:
    """The response's JSON, or a FetchError saying the provider sent something else."""
    try:
        return response.json()
    except ValueError as exc:
        if is_html(response):
            raise FetchError(
                f"{name} sent a response that is not JSON (an HTML page) from {address(response.url)}"
            ) from None
        said = body_excerpt(response, 80)
        raise FetchError(
            f"{name} sent a response that is not JSON ({str(exc).split(':')[0]}) from "
            f"{address(response.url)}" + (f": {said!r}" if said else "")
        ) from None
