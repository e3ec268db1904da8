"""A store on a Chroma server: its HTTP client, with the lab's token when one is set, and
the errors a server or the proxy in front of it answers with, said in one line.

`chroma run` (Chroma 1.x) checks no credentials; a lab puts it behind a proxy that asks for
`Authorization: Bearer <token>` (deploy/, docs/server.md). The token is sent by Chroma's own
token client and never appears in a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import ParseResult, urlparse

from assistant.config import Settings
from assistant.errors import ServerUnreachableError, StoreError, _chain

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from pydantic import SecretStr

SERVER_TIMEOUT = 120.0  # seconds a Chroma server may take to answer one request
# Seconds to open a connection: a server that answers at all does in milliseconds; a host that
# is down (no refusal comes back) must not hold a command, or a key of the review UI, for long.
CONNECT_TIMEOUT = 3.0


def server_url(url: str) -> ParseResult:
    """The parts of a Chroma server's URL, `http://` when it names no scheme."""
    return urlparse(url if "://" in url else f"http://{url}")


def http_client(url: str, token: SecretStr | None = None) -> ClientAPI:
    """A client of the Chroma server at `url`. With a token, every request carries
    `Authorization: Bearer <token>` (Chroma's own token client): `chroma run` checks no
    credentials itself, the proxy in front of it does (deploy/, docs/server.md)."""
    import chromadb
    import httpx
    from chromadb.config import Settings as ChromaSettings

    parsed = server_url(url)
    if not parsed.hostname:
        raise StoreError(f"invalid Chroma URL {url!r}: expected e.g. http://127.0.0.1:8000")
    ssl = parsed.scheme == "https"
    port = parsed.port or (443 if ssl else 8000)
    settings = ChromaSettings(anonymized_telemetry=False)
    value = token.get_secret_value() if token is not None else ""
    if value:  # an empty TRIAGE_CHROMA_TOKEN= is no token
        if not all(c.isascii() and c.isprintable() and not c.isspace() for c in value):
            raise StoreError(
                "TRIAGE_CHROMA_TOKEN (chroma_token) is not a token a Chroma client can send: "
                "ASCII letters, digits and punctuation only, no spaces"
            )
        settings.chroma_client_auth_provider = "chromadb.auth.token_authn.TokenAuthClientProvider"
        settings.chroma_client_auth_credentials = value
    client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=ssl, settings=settings)
    # Chroma's client waits for ever; a server that stopped answering (one seen stuck after its
    # disk filled) must end the command with a message instead.
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None and hasattr(session, "timeout"):
        session.timeout = httpx.Timeout(SERVER_TIMEOUT, connect=CONNECT_TIMEOUT)
    return client


# HTTP answers of a proxy in front of the server (Chroma's own server sends none of them).
_REFUSED = (401, 403)
_UPSTREAM_DOWN = (502, 503, 504)


def server_refusal(exc: BaseException, settings: Settings) -> StoreError | None:
    """The error in words for a Chroma server that cannot be reached (stopped, restarting,
    the network down), or whose proxy refused a request: no token or the wrong one (HTTP
    401/403, or Chroma's own authentication errors), or the server behind it not answering
    (502/503/504); None for any other error. The token is never part of the words. A server
    that cannot be reached is a `ServerUnreachableError`: it passes, and the review UI keeps
    what it could not write until the server answers again."""
    import httpx
    from chromadb.errors import AuthorizationError, ChromaAuthError

    location = settings.store_location
    for error in _chain(exc):
        if isinstance(error, httpx.TransportError):
            return ServerUnreachableError(
                f"cannot reach the Chroma server at {location}: {error} (is it running?)"
            )
        status = _status(error)
        if isinstance(error, ChromaAuthError | AuthorizationError) or status in _REFUSED:
            if settings.chroma_token is None or not settings.chroma_token.get_secret_value():
                return StoreError(
                    f"the Chroma server at {location} asks for a token: set TRIAGE_CHROMA_TOKEN "
                    "(or chroma_token in the config file) to one its proxy accepts (docs/server.md)"
                )
            return StoreError(
                f"the Chroma server at {location} refused the token: check TRIAGE_CHROMA_TOKEN "
                "(or chroma_token in the config file) against those its proxy accepts (docs/server.md)"
            )
        if status in _UPSTREAM_DOWN:
            return ServerUnreachableError(
                f"the Chroma server at {location} does not answer behind its proxy (HTTP {status}): "
                "is `chroma run` up? (docs/server.md)"
            )
    return None


def _status(error: BaseException) -> int | None:
    """The HTTP status an error from Chroma's client carries: its HTTP client's own error, the
    cause of the bare `Exception(body)` Chroma raises for an answer that is not its JSON."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None
