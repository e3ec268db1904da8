"""The request's deadline on every read and write of the socket: httpx's timeout applies to
one read, this one to the whole request, retries and waits included."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes wait no longer than the request's deadline leaves."""

    def __init__(self, inner: httpcore.NetworkStream, backend: DeadlineBackend) -> None:
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
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded), self._backend)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
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
        return DeadlineStream(
            self._inner.connect_tcp(host, port, bounded, local_address, socket_options), self
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = self.bound(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.connect_unix_socket(path, bounded, socket_options), self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install_deadline(client: httpx.Client, backend: DeadlineBackend) -> bool:
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


class Clock:
    """The time one request has spent: its attempts as they ran, and the waits it asked for as
    asked (a sleep that returns at once, as in tests, still counts); the provider's own pause
    between requests does not count."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.started = time.monotonic()
        self.extra = 0.0

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.started + self.extra)
