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
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpcore
import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type

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


# -- the deadline, on every read and write of the socket ---------------------------------------


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes wait no longer than the request's deadline leaves."""

    def __init__(self, inner: httpcore.NetworkStream, backend: _DeadlineBackend) -> None:
        self._inner = inner
        self._backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._backend.bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._backend.bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = self._backend.bound(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded), self._backend)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each wait cut to what is left until `until` (a monotonic time; None:
    no deadline). httpx's own timeout applies to one read; this one to the request."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner
        self.until: float | None = None

    def bound(self, timeout: float | None, late: type[Exception]) -> float | None:
        if self.until is None:
            return timeout
        left = self.until - time.monotonic()
        if left <= 0:
            raise late("the request's deadline passed")
        return left if timeout is None else min(timeout, left)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = self.bound(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, bounded, local_address, socket_options), self
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = self.bound(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, bounded, socket_options), self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _install_deadline(client: httpx.Client, backend: _DeadlineBackend) -> bool:
    """Put the deadline under every connection pool of the client (its own and the proxies'
    from the environment); False where httpx is built otherwise (then each read still has
    the request's remaining time as its timeout, and the body is checked between chunks)."""
    transports: Iterable[Any] = [client._transport, *client._mounts.values()]
    done = False
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if isinstance(getattr(pool, "_network_backend", None), httpcore.SyncBackend):
            pool._network_backend = backend  # type: ignore[union-attr]
            done = True
    return done


class _Clock:
    """The time one request has spent: its attempts as they ran, and the waits it asked for as
    asked (a sleep that returns at once, as in tests, still counts); the provider's own pause
    between requests does not count."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.started = time.monotonic()
        self.extra = 0.0

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.started + self.extra)


class _Retry(Exception):
    """A failed attempt worth repeating: a 429, a 5xx or a network error (not a refused
    connection); `reason` is what the error says if it is the last."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status


@dataclass
class PoliteClient:
    """HTTP for one provider: `delay` seconds between requests, `retries` retries of 429/5xx and
    network errors (backoff `delay * 2^attempt`, or Retry-After when the server says), all
    within `deadline` seconds a request; a Retry-After longer than what is left of the deadline
    (or than `max_wait`) ends the request instead of stalling the run. A body is read to
    `max_bytes` (decompressed) at most."""

    name: str
    delay: float = 1.0
    retries: int = 4
    timeout: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict)
    hint: str = ""
    max_wait: float = 600.0
    sleep: Callable[[float], None] = time.sleep
    deadline: float = DEADLINE
    max_bytes: int = MAX_BYTES
    requests: int = 0
    waited: float = 0.0  # seconds spent in the provider's enforced waits (delay and Retry-After)
    _last: float = 0.0
    _client: httpx.Client | None = None
    _backend: _DeadlineBackend = field(default_factory=lambda: _DeadlineBackend(httpcore.SyncBackend()))
    _clock: _Clock | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=self.timeout,
                headers={"User-Agent": USER_AGENT, **self.headers},
                follow_redirects=True,
            )
            _install_deadline(self._client, self._backend)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _pause(self, seconds: float, counts: bool = True) -> None:
        """Sleep; a wait the server or the backoff asks for counts against the request's
        deadline, the provider's pause between requests does not."""
        if seconds <= 0:
            return
        self.waited += seconds
        began = time.monotonic()
        self.sleep(seconds)
        slept = time.monotonic() - began
        if self._clock is not None:
            self._clock.extra += (seconds - slept) if counts else -slept

    def _left(self) -> float:
        return self._clock.left() if self._clock is not None else self.deadline

    def _backoff(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        attempt = state.attempt_number - 1
        if isinstance(exc, _Retry) and exc.retry_after is not None:
            return max(exc.retry_after, self.delay)
        return self.delay * 2.0**attempt if self.delay else 0.0

    def _stop(self, state: RetryCallState) -> bool:
        """No more tries: the retries are spent, or the next wait would pass the deadline."""
        return state.attempt_number > self.retries or self._backoff(state) >= self._left()

    def _late(self, url: httpx.URL) -> FetchError:
        return FetchError(
            f"the answer from {host(url)} took longer than {self.deadline:g} s (the deadline for "
            f"one request: the server is too slow or stalls); skipped"
        )

    def _read(self, response: httpx.Response) -> None:
        """Read the body in chunks, decompressed, up to `max_bytes` and within the deadline."""
        too_big = FetchError(
            f"the answer from {host(response.url)} is larger than {size_words(self.max_bytes)}; skipped"
        )
        length = response.headers.get("Content-Length", "")
        if not response.headers.get("Content-Encoding") and length.isdigit() and int(length) > self.max_bytes:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise too_big
            chunks.append(chunk)
            if self._left() <= 0:
                raise self._late(response.url)
        response._content = b"".join(chunks)  # what Response.read() sets

    def _attempt(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        self._pause(self._last + self.delay - time.monotonic(), counts=False)
        self._last = time.monotonic()
        self.requests += 1
        left = self._left()
        http = self._http()
        request = http.build_request(method, url, timeout=max(min(self.timeout, left), 0.001), **kwargs)
        if left <= 0:
            raise self._late(request.url)
        self._backend.until = time.monotonic() + left
        try:
            response = http.send(request, stream=True)
            try:
                self._read(response)
            finally:
                response.close()
        except httpx.UnsupportedProtocol as exc:
            try:
                target = exc.request.url
            except RuntimeError:  # an error raised before any request was made
                target = request.url
            if target == request.url:
                raise FetchError(f"{address(target)} is not a web address (http or https)") from None
            raise FetchError(
                f"{self.name} at {address(request.url)} redirected to a non-web address "
                f"({target.scheme}:), which was refused{self.hint}"
            ) from None
        except httpx.TooManyRedirects:
            raise FetchError(f"{address(request.url)} redirects in a loop; try again later") from None
        except httpx.DecodingError as exc:
            raise FetchError(
                f"the answer from {host(request.url)} could not be decompressed ({str(exc)[:80]}); skipped"
            ) from None
        except httpx.ConnectError as exc:
            if _refused(exc):
                where = exc.request.url
                port = where.port or {"https": 443, "http": 80}.get(where.scheme)
                raise FetchError(
                    f"cannot reach {self.name} (cannot connect to {where.host}:{port}: connection "
                    f"refused): is the address right, or are you offline?{self.hint}"
                ) from None
            if self._left() <= 0:
                raise self._late(request.url) from None
            raise _Retry(type(exc).__name__) from exc
        except httpx.TransportError as exc:
            if self._left() <= 0:
                raise self._late(request.url) from None
            raise _Retry(type(exc).__name__) from exc
        finally:
            self._backend.until = None
        if response.status_code == 429 or response.status_code >= 500:
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            if wait is not None and not wait <= min(self.max_wait, self._left()):
                raise FetchError(
                    f"{self.name} asks to wait {wait_words(wait)} before the next request (HTTP "
                    f"{response.status_code}), more than the {self.deadline:g} s a request may take; "
                    "try again later"
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
            stop=self._stop,
            wait=self._backoff,
            retry=retry_if_exception_type(_Retry),
            sleep=self._pause,
            reraise=True,
        )
        self._clock = _Clock(self.deadline)
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
        finally:
            self._clock = None
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

    def get_items(self, url: str, items: int, **kwargs: Any) -> tuple[Any, bool]:
        """The JSON answer with its list (top-level, or a top-level key's) cut to `items`
        entries, and whether anything was left out."""
        return read_json(self.name, self.get(url, **kwargs), items)

    def post_items(self, url: str, items: int, **kwargs: Any) -> tuple[Any, bool]:
        return read_json(self.name, self.post(url, **kwargs), items)


# -- JSON, read to a bound -------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WORDS = (("true", True), ("false", False), ("null", None))
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class _BoundedJson:
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
        reader = _BoundedJson(text, items)
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
