"""A polite HTTP client: a minimum delay between requests to one provider, retries of 429 and
5xx with exponential backoff honouring Retry-After (tenacity), and one-line errors.

One client per provider is shared by every feed of a run, so two arXiv feeds still make one
request every 3 seconds between them.
"""

from __future__ import annotations

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


class FetchError(TriageError):
    """A provider could not be reached, refused the request or sent something unreadable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a refused request


class _Retry(Exception):
    """A failed attempt worth repeating: a 429, a 5xx or a network error."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status


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
        except httpx.TransportError as exc:
            raise _Retry(type(exc).__name__) from exc
        if response.status_code == 429 or response.status_code >= 500:
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            if wait is not None and wait > self.max_wait:
                raise FetchError(
                    f"{self.name} asks to wait {wait:.0f}s before the next request (HTTP "
                    f"{response.status_code}); try again later"
                )
            raise _Retry(f"HTTP {response.status_code}", wait, response.status_code)
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
            raise FetchError(f"{self.name} kept answering HTTP {exc.status}; try again later") from None
        if response.status_code >= 400:
            raise FetchError(
                f"{self.name} refused the request (HTTP {response.status_code}): "
                f"{' '.join(response.text[:200].split())}",
                response.status_code,
            )
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
        raise FetchError(
            f"{name} sent a response that is not JSON ({str(exc).split(':')[0]}): "
            f"{' '.join(response.text[:80].split())!r}"
        ) from None
