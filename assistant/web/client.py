"""The polite client itself: one per provider, a minimum delay between requests, retries
with backoff honouring Retry-After, all within the request's deadline and size cap."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type

from assistant.web.deadline import Clock, DeadlineBackend, install_deadline
from assistant.web.jsonread import json_of, read_json
from assistant.web.messages import (
    DEADLINE,
    MAX_BYTES,
    USER_AGENT,
    FetchError,
    address,
    host,
    http_failure,
    refused,
    retry_after_seconds,
    size_words,
    wait_words,
)


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
    _backend: DeadlineBackend = field(default_factory=lambda: DeadlineBackend(httpcore.SyncBackend()))
    _clock: Clock | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=self.timeout,
                headers={"User-Agent": USER_AGENT, **self.headers},
                follow_redirects=True,
            )
            install_deadline(self._client, self._backend)
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
            if refused(exc):
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
        self._clock = Clock(self.deadline)
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
