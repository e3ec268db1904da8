"""Opening a store: the Chroma client (embedded or a server) and collections, the locks that
keep writers apart, and the translation of Chroma's errors (full disk, read-only, removed
store) into one-line errors."""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self, cast
from urllib.parse import urlparse

import chromadb
import httpx
import platformdirs
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError

from assistant.config import Settings
from assistant.embedding import make_embedder
from assistant.errors import (
    ReadOnlyError,
    StoreError,
    TriageError,
    disk_full,
    is_disk_full,
    is_disk_full_at,
    is_read_only,
    read_only,
    store_gone,
)

META_COLLECTION_SUFFIX = "-meta"
SERVER_TIMEOUT = 120.0  # seconds a Chroma server may take to answer one request


class _Guarded:
    """A Chroma collection whose errors the store says in words: a full disk (Chroma's
    "Error in compaction" on a nearly full disk included), a read-only or removed store."""

    def __init__(self, collection: Collection, store: Connection) -> None:
        self._collection = collection
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._collection, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Exception as exc:
                error = self._store.refusal(exc)
                if error is None:
                    raise
                raise error from exc

        return call


class Connection:
    """An open store: its client, its two collections (errors said in words), where it is,
    and the writer lock every write holds. The other parts of `Store` build on this."""

    def __init__(
        self, client: ClientAPI, collection: Collection, meta: Collection, location: str, embedder: Any
    ) -> None:
        self.client = client
        self.embedder = embedder
        self.collection = cast(Collection, _Guarded(collection, self))
        self.meta = cast(Collection, _Guarded(meta, self))
        self.location = location
        self.path: Path | None = None  # an embedded store's folder
        self._batch = max(1, min(client.get_max_batch_size(), 1000))
        self.lock_path: Path | None = None
        self._thread_lock = threading.RLock()
        self._prepared: dict[str, Any] = {}  # text -> vector, embedded ahead of a write
        self._holding = False  # whether this store's writer lock is held (by the thread in _thread_lock)
        self.snapshot: str | None = None  # why this is a temporary copy of the store, if it is

    @classmethod
    def open_for_reading(cls, settings: Settings, embedder: Any | None = None) -> Self:
        """Open the store for a command that only reads it. Chroma writes to its database even
        to open it, so an embedded store on a full disk or a read-only mount is read from a
        temporary copy instead (`snapshot` is set; nothing written there is kept)."""
        try:
            store = cls.open(settings, embedder)
            # Chroma applies its write log at the first read: on a full disk that read fails.
            store.collection.count()
            return store
        except StoreError as exc:
            if settings.local_store is None or not settings.store_exists:
                raise
            if not (is_disk_full(exc) or isinstance(exc, ReadOnlyError)):
                raise
            copy = Path(tempfile.mkdtemp(prefix="triage-read-"))
            try:
                shutil.copytree(settings.store, copy / "store")
            except OSError as copy_error:
                shutil.rmtree(copy, ignore_errors=True)
                raise StoreError(
                    f"{exc}; reading from a temporary copy failed too ({copy_error.strerror})"
                ) from exc
            atexit.register(shutil.rmtree, copy, True)
            store = cls.open(settings.model_copy(update={"store": copy / "store"}), embedder)
            store.snapshot = "the disk is full" if is_disk_full(exc) else "the store is read-only"
            store.location = settings.store_location
            return store

    @classmethod
    def open(cls, settings: Settings, embedder: Any | None = None) -> Self:
        """Open (creating if needed) the store the settings point at."""
        api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        ef = embedder or make_embedder(settings.embedder, api_key, settings.openai_base_url)
        location = settings.store_location
        try:
            if not settings.chroma_url:
                settings.store.mkdir(parents=True, exist_ok=True)
            with _creating(settings):
                if settings.chroma_url:
                    client = _http_client(settings.chroma_url)
                else:
                    client = chromadb.PersistentClient(
                        path=str(settings.store.resolve()), settings=_chroma_settings()
                    )
                collection = client.get_or_create_collection(
                    settings.collection, embedding_function=ef, configuration={"hnsw": {"space": "cosine"}}
                )
                meta = client.get_or_create_collection(
                    settings.collection + META_COLLECTION_SUFFIX, embedding_function=None
                )
        except (ChromaError, ValueError, OSError) as exc:
            if settings.local_store is not None:
                _forget_client(settings.local_store)
            if is_disk_full(exc):
                raise disk_full(location, settings.local_store) from exc
            if is_read_only(exc):
                raise read_only(location) from exc
            raise StoreError(f"cannot open the store at {location}: {exc}") from exc
        except Exception as exc:  # connection errors come from httpx and others
            if type(exc).__module__.split(".")[0] in ("httpx", "httpcore", "requests", "urllib3"):
                raise StoreError(f"cannot reach the Chroma server at {location}: {exc}") from exc
            raise
        store = cls(client, collection, meta, location, ef)
        if settings.chroma_url:  # writers on this machine share a lock per server collection
            digest = hashlib.sha256(f"{location}#{settings.collection}".encode()).hexdigest()[:16]
            store.lock_path = Path(platformdirs.user_cache_dir("triage")) / "locks" / f"{digest}.lock"
        else:
            store.lock_path = settings.store / "triage-write.lock"
            store.path = settings.store
        return store

    def refusal(self, exc: BaseException) -> StoreError | None:
        """The error in words for a Chroma error that means the store cannot be written (its
        folder removed, its disk full, read-only), or None for any other error."""
        if isinstance(exc, TriageError):
            return None
        if self.path is not None and not self.path.is_dir():
            return store_gone(self.location)
        if is_disk_full_at(exc, self.path):
            return disk_full(self.location, self.path)
        if is_read_only(exc):
            return read_only(self.location)
        return None

    @property
    def cache_key(self) -> str:
        """Names this store for caches of derived state. The collection's id is new whenever a
        collection is created: two projects with a store at the same relative path, or a store
        deleted and rebuilt, never share a cache."""
        return f"{self.location}#{self.collection.name}#{self.collection.id}"

    # -- the writer lock -------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the store's writer lock: across processes on this machine, one at a time
        (deduplicating and upserting must see what the other writer just stored). A lock
        that cannot be made (a read-only store) is not taken: the write itself then fails.
        Re-entrant: a write inside a held lock does not wait for itself.

        Every write to the collections takes it, not only those that must see each other's
        results: an embedded store's processes each apply the shared write log to the store,
        and two applying at once can apply an older write after a newer one (a paper taken
        out of a list came back)."""
        if self.lock_path is None:
            yield
            return
        with self._thread_lock:
            if self._holding:
                yield
                return
            if self.path is not None and not self.path.is_dir():
                raise store_gone(self.location)  # its lock file would make the folder again
            with _file_lock(self.lock_path, make_dir=self.path is None):
                self._holding = True
                try:
                    yield
                finally:
                    self._holding = False


@contextmanager
def _creating(settings: Settings) -> Iterator[None]:
    """Hold a lock while an embedded store is created: two processes creating the same new
    store at once both run Chroma's schema migrations, and the second fails ("table
    collections already exists"). An existing store is opened without the lock."""
    if settings.chroma_url or (settings.store / "chroma.sqlite3").exists():
        yield
        return
    with _file_lock(settings.store / "triage-create.lock"):
        yield


@contextmanager
def _file_lock(path: Path, make_dir: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` across processes on this machine; a lock file that
    cannot be made (a read-only store) is not taken: what the lock guards then fails itself.
    `make_dir`: make the lock's folder if it is missing (never a store's own folder)."""
    try:
        if make_dir:
            path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")  # noqa: SIM115 - held for the block
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _http_client(url: str) -> ClientAPI:
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise StoreError(f"invalid Chroma URL {url!r}: expected e.g. http://127.0.0.1:8000")
    ssl = parsed.scheme == "https"
    port = parsed.port or (443 if ssl else 8000)
    client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=ssl, settings=_chroma_settings())
    # Chroma's client waits for ever; a server that stopped answering (one seen stuck after its
    # disk filled) must end the command with a message instead.
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None and hasattr(session, "timeout"):
        session.timeout = httpx.Timeout(SERVER_TIMEOUT, connect=10.0)
    return client


def _forget_client(path: Path) -> None:
    """Drop Chroma's cached client of a store that failed to open: it caches clients by path
    in the process, and the next open would get the broken one back."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(path.resolve()), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path.resolve()), None)
    except (ImportError, AttributeError, OSError):
        pass


def _chroma_settings() -> ChromaSettings:
    return ChromaSettings(anonymized_telemetry=False)
