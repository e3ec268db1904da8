"""Opening a store: the Chroma client (embedded or a server) and collections, the locks that
keep writers apart, the translation of Chroma's errors (full disk, read-only, removed store)
into one-line errors, and the routing of every call to a collection.

An embedded store is opened without Chroma when its mirror (`mirror`) is current: reads are
answered from the mirror, small metadata writes go to the store's queue (`pending`) and the
mirror, and Chroma is opened only for what needs it (vectors, search, new text), at which
point the queue is applied to it first. A Chroma server is always read and written directly.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

import platformdirs

from assistant.config import Settings
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
from assistant.store.mirror import (
    META,
    PAPERS,
    ChromaState,
    Mirror,
    Row,
    Stamp,
    StateReader,
    chroma_state,
    mirror_path,
    remove_other_layouts,
)
from assistant.store.pacing import Pacer
from assistant.store.pending import Pending, Write
from assistant.store.people import PLAIN, STAMP, View, stamp_key
from assistant.store.server import SERVER_TIMEOUT as SERVER_TIMEOUT
from assistant.store.server import http_client, server_refusal

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.config import Settings as ChromaSettings

META_COLLECTION_SUFFIX = "-meta"
BATCH = 1000  # records per Chroma call (its own limit is larger)
WRITES = ("add", "update", "upsert", "delete")


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
            started = time.monotonic()
            try:
                result = value(*args, **kwargs)
            except Exception as exc:
                error = self._store.refusal(exc)
                if error is None:
                    raise
                raise error from exc
            if self._store.pace:  # a niced process on a server store (`assistant.store.pacing`);
                self._store.paced(time.monotonic() - started)  # not after a failure or ^C
            return result

        return call


class _Routed:
    """One of the store's collections as the rest of the store calls it: `get` and `count`
    answered from the mirror while it is current and Chroma is not open, writes queued or
    made in Chroma (and the mirror brought along), anything else from Chroma itself."""

    def __init__(self, store: Connection, kind: int) -> None:
        self._store = store
        self._kind = kind

    def get(
        self,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include: Sequence[str] = ("metadatas", "documents"),
        stored: bool = False,
        **rest: Any,
    ) -> Any:
        """`Collection.get` through the person's view (`stored`: the keys as stored, everyone's)."""
        store = self._store
        view = store.view if self._kind == PAPERS and not stored else PLAIN
        where = view.where(where)
        found = self._get(ids, where, limit, offset, include, **rest)
        if view.plain or not found.get("metadatas"):
            return found
        return {**found, "metadatas": view.read_all(found["metadatas"])}

    def _get(
        self,
        ids: Sequence[str] | None,
        where: dict[str, Any] | None,
        limit: int | None,
        offset: int | None,
        include: Sequence[str],
        **rest: Any,
    ) -> Any:
        store = self._store

        def from_mirror() -> Any:
            """The mirror's answer when it serves this read (None: ask Chroma)."""
            if rest or not store._mirror_serves():
                return None
            assert store.mirror is not None
            return store.mirror.get(self._kind, ids, where, limit, offset, include)

        found = from_mirror()
        if found is not None:
            return found
        arguments: dict[str, Any] = {
            "ids": ids,
            "where": where,
            "limit": limit,
            "offset": offset,
            "include": list(include),
        }
        # The queue holds papers' metadata only: a read of their text or vectors needs no drain.
        metadata = self._kind == META or "metadatas" in include or where is not None or bool(rest)
        chroma = store._chroma(self._kind, metadata)
        found = from_mirror() if metadata else None  # a queue Chroma could not take is there
        if found is not None:
            return found
        return chroma.get(**{k: v for k, v in arguments.items() if v is not None}, **rest)

    def query(self, *, where: dict[str, Any] | None = None, **call: Any) -> Any:
        view = self._store.view if self._kind == PAPERS else PLAIN
        if where is not None:
            call["where"] = view.where(where)
        found: Any = self._store._chroma(self._kind).query(**call)
        if view.plain or not found.get("metadatas"):
            return found
        return {**found, "metadatas": [view.read_all(metas) for metas in found["metadatas"]]}

    def count(self) -> int:
        store = self._store
        if store._mirror_serves():
            assert store.mirror is not None
            return store.mirror.count(self._kind)
        return int(store._chroma(self._kind, metadata=self._kind == META).count())

    def __getattr__(self, name: str) -> Any:
        if name in WRITES:
            return functools.partial(self._store._write_call, self._kind, name)
        return getattr(self._store._chroma(self._kind), name)


class Connection:
    """An open store: its two collections (errors said in words), where it is, its mirror and
    queue of small writes (embedded), and the writer lock every write holds. The other parts
    of `Store` build on this."""

    def __init__(self, settings: Settings, embedder: Any | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self._client: ClientAPI | None = None
        self._collections: dict[int, Collection] = {}
        self.collection = cast("Collection", _Routed(self, PAPERS))
        self.meta = cast("Collection", _Routed(self, META))
        self.location = settings.store_location
        self.path: Path | None = None  # an embedded store's folder
        self._batch = BATCH
        self.lock_path: Path | None = None
        self._thread_lock = threading.RLock()
        self._prepared: dict[str, Any] = {}  # text -> vector, embedded ahead of a write
        # The thread holding this store's writer lock (the one in _thread_lock), or None.
        self._holder: int | None = None
        self.snapshot: str | None = None  # why this is a temporary copy of the store, if it is
        self.mirror: Mirror | None = None
        # Whose window on the papers this is (`assistant.store.people`): set when the store is
        # opened; until then (and for a migration) the stored keys as they are.
        self.view: View = PLAIN
        self.pending: Pending | None = None
        self._names = (settings.collection, settings.collection + META_COLLECTION_SUFFIX)
        self._draining = False
        self._state: StateReader | None = None  # reads Chroma's state (embedded)
        self._existed = False  # an embedded store whose database was there when it was opened
        self._refused: StoreError | None = None  # why the queue could not be applied, if so
        # How long a niced process waits after a request to the server (`assistant.store.pacing`),
        # and the waits owed by requests made inside the writer lock (`paced`).
        self.pace: Pacer | None = Pacer(settings.chroma_url) if settings.chroma_url else None
        self._owed = 0.0

    @classmethod
    def open_for_reading(cls, settings: Settings, embedder: Any | None = None) -> Self:
        """Open the store for a command that only reads it. Chroma writes to its database even
        to open it, so an embedded store on a full disk or a read-only mount is read from a
        temporary copy instead (`snapshot` is set; nothing written there is kept)."""
        try:
            store = cls.open(settings, embedder)
            if store.connected:
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
        """Open (creating if needed) the store the settings point at: an embedded store with a
        current mirror without Chroma (it is opened when needed), any other at once."""
        store = cls(settings, embedder)
        if settings.chroma_url:  # writers on this machine share a lock per server collection
            digest = hashlib.sha256(f"{store.location}#{settings.collection}".encode()).hexdigest()[:16]
            store.lock_path = Path(platformdirs.user_cache_dir("triage")) / "locks" / f"{digest}.lock"
            store._connect()
            return store
        store.lock_path = settings.store / "triage-write.lock"
        store.path = settings.store
        store.mirror = Mirror(mirror_path(settings.store, settings.collection))
        store.pending = Pending(settings.store)
        store._existed = (settings.store / "chroma.sqlite3").exists()
        if not store._existed or not store.mirror_current():
            store._connect()
            store._rebuild_mirror()
        return store

    @property
    def connected(self) -> bool:
        """Whether Chroma is open in this process."""
        return self._client is not None

    @property
    def client(self) -> ClientAPI:
        self._ensure_connected()
        assert self._client is not None
        return self._client

    @property
    def embedder(self) -> Any:
        """The store's embedder, made at first use (opening a store does not load a model)."""
        if self._embedder is None:
            from assistant.embedding import make_embedder

            settings = self.settings
            api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
            self._embedder = make_embedder(settings.embedder, api_key, settings.openai_base_url)
        return self._embedder

    @embedder.setter
    def embedder(self, value: Any) -> None:
        self._embedder = value

    # -- Chroma -----------------------------------------------------------------

    def _connect(self) -> None:
        """Open Chroma (creating the store if needed) and apply the queue of small writes."""
        import chromadb
        from chromadb.errors import ChromaError

        settings = self.settings
        location = self.location
        if self._existed and not settings.store.is_dir():
            raise store_gone(location)  # opening Chroma would make the removed folder again
        ef = self.embedder
        try:
            if not settings.chroma_url:
                settings.store.mkdir(parents=True, exist_ok=True)
            with _creating(settings):
                if settings.chroma_url:
                    client = http_client(settings.chroma_url, settings.chroma_token)
                else:
                    client = chromadb.PersistentClient(
                        path=str(settings.store.resolve()), settings=_chroma_settings()
                    )
                collection = client.get_or_create_collection(
                    self._names[0], embedding_function=ef, configuration={"hnsw": {"space": "cosine"}}
                )
                meta = client.get_or_create_collection(self._names[1], embedding_function=None)
        except (ChromaError, ValueError, OSError) as exc:
            if settings.local_store is not None:
                _forget_client(settings.local_store)
            refused = server_refusal(exc, settings) if settings.chroma_url else None
            if refused is not None:
                raise refused from exc
            if is_disk_full(exc):
                raise disk_full(location, settings.local_store) from exc
            if is_read_only(exc):
                raise read_only(location) from exc
            raise StoreError(f"cannot open the store at {location}: {exc}") from exc
        except Exception as exc:  # connection errors come from httpx and others
            refused = server_refusal(exc, settings) if settings.chroma_url else None
            if refused is not None:
                raise refused from exc
            if type(exc).__module__.split(".")[0] in ("httpx", "httpcore", "requests", "urllib3"):
                raise StoreError(f"cannot reach the Chroma server at {location}: {exc}") from exc
            raise
        self._collections = {
            PAPERS: cast("Collection", _Guarded(collection, self)),
            META: cast("Collection", _Guarded(meta, self)),
        }
        self._client = client

    def _ensure_connected(self) -> None:
        if self._client is None:
            self._connect()

    def _chroma(self, kind: int, metadata: bool = True) -> Collection:
        """The Chroma collection itself (opened if needed), with the queue applied to it first
        when what is read or written depends on metadata."""
        self._ensure_connected()
        if metadata and not self._draining and self.pending is not None and self.pending.waiting():
            self.drain()
        return self._collections[kind]

    # -- the mirror and the queue -------------------------------------------------

    def stamp(self) -> Stamp | None:
        """The state of an embedded store's data: Chroma's and its queue's (None for a server,
        or when it cannot be read)."""
        if self.path is None or self.pending is None:
            return None
        if self._state is None:
            self._state = StateReader(self.path, self._names)
        return store_stamp(self._state.state(), self.pending)

    def mirror_current(self) -> bool:
        """Whether the mirror reflects the store as it is now."""
        if self.mirror is None:
            return False
        now = self.stamp()
        return now is not None and self.mirror.stamp() == now

    def _mirror_serves(self) -> bool:
        """Whether a read is answered from the mirror: Chroma is not open and the mirror is
        current. A mirror gone stale (another program wrote) is left for Chroma, opened now."""
        if self.mirror is None:
            return False
        if self._client is not None:
            # Chroma's reads are current once the queue is applied; a queue it could not take
            # (a full disk) is still in the mirror.
            return bool(self.pending is not None and self.pending.waiting() and self.mirror_current())
        if self.mirror_current():
            return True
        if self.path is not None and not self.path.is_dir():
            return True  # the store was removed: reads show it as last seen, writes say it is gone
        self._connect()
        return False

    def _rebuild_mirror(self) -> None:
        """Read every record from Chroma into the mirror (nothing is kept if a write came
        meanwhile, or the mirror cannot be written: reads then go to Chroma)."""
        mirror = self.mirror
        self.drain()  # first: a drain during the read below would void it
        before = self.stamp()
        if mirror is None or before is None:
            return
        rows: list[Row] = []
        for kind in (PAPERS, META):
            offset = 0
            include: list[Any] = ["documents", "metadatas"] + (["embeddings"] if kind == PAPERS else [])
            while True:
                res = self._chroma(kind).get(limit=BATCH, offset=offset, include=include)
                empty: list[Any] = [None] * len(res["ids"])
                docs: list[Any] = list(res["documents"] or empty)
                metas: list[Any] = list(res["metadatas"] or empty)
                found: Any = res.get("embeddings")
                vectors: list[Any] = empty if found is None else list(found)
                for pid, doc, meta, vec in zip(res["ids"], docs, metas, vectors, strict=True):
                    rows.append((kind, pid, doc, dict(meta) if meta else None, _vector_bytes(vec)))
                if len(res["ids"]) < BATCH:
                    break
                offset += BATCH
        if self.pending is not None and self.pending.waiting():  # refused: the mirror has it on top
            rows = _overlay(rows, self.pending.writes())
        try:
            with self.write_lock():
                if self.stamp() == before:
                    try:
                        mirror.rebuild(rows, before)
                    except sqlite3.DatabaseError:  # a damaged file: made anew
                        self._drop_mirror()
                        self.mirror = mirror = Mirror(mirror.path)
                        mirror.rebuild(rows, before)
        except (sqlite3.Error, OSError):
            self._drop_mirror()
            return
        remove_other_layouts(mirror.path)

    def _drop_mirror(self) -> None:
        """Stop using a mirror that cannot be written; the file goes (a stale copy misleads)."""
        if self.mirror is not None:
            self.mirror.close()
            for suffix in ("", "-journal"):
                Path(f"{self.mirror.path}{suffix}").unlink(missing_ok=True)
            self.mirror.remove_derived()
        self.mirror = None

    def _write_call(self, kind: int, op: str, stored: bool = False, **call: Any) -> Any:
        """A write to a collection: queued (Chroma not open, a write of metadata only, the
        mirror current) or made in Chroma; the mirror is brought along when it was current.
        `stored`: the keys as stored, not through the person's view."""
        if kind == PAPERS and not self.view.plain and not stored:
            if call.get("metadatas") is not None:
                given = _listed(call["metadatas"], len(call["ids"])) or []
                call["metadatas"] = [self.view.written(m) for m in given]
            if call.get("where") is not None:
                call["where"] = self.view.where(call["where"])
        ids = list(call.get("ids") or [])
        metadatas = call.get("metadatas")
        documents = call.get("documents")
        queueable = (
            kind == PAPERS and op == "update" and documents is None and "embeddings" not in call
        ) or (kind == META and op in ("upsert", "delete"))
        with self.write_lock():
            now = self.stamp() if queueable and self._client is None else None
            if now is not None and self.mirror is not None and self.mirror.stamp() == now:
                assert self.pending is not None  # an embedded store (a stamp says so)
                try:
                    seq = self.pending.append(kind, op, ids, metadatas, documents)
                except (sqlite3.Error, OSError) as exc:
                    error = self.refusal(exc)
                    if error is None:
                        raise StoreError(
                            f"cannot write the store's queue of small writes {self.pending.path}: {exc}"
                        ) from exc
                    raise error from exc
                # Chroma's part of the stamp as checked above, under the lock: a write by another
                # program since then leaves the mirror stale, as it should.
                try:
                    self.mirror.apply(kind, op, ids, metadatas, documents, (*now[:5], seq))
                except (sqlite3.Error, OSError):
                    self._drop_mirror()
                return None
            chroma = self._chroma(kind)
            if not self._draining and self.pending is not None and self.pending.waiting():
                # The queue could not be applied (we hold the writer lock: no one added to it):
                # a write now would land before older queued ones.
                raise self._refused or StoreError(
                    f"the store at {self.location} could not take its queued writes; nothing was written"
                )
            before = self.stamp()
            current = before is not None and self.mirror is not None and self.mirror.stamp() == before
            result = getattr(chroma, op)(**call)
            if current and self.mirror is not None:
                embeddings = call.get("embeddings")
                vectors = (
                    None if embeddings is None or kind == META else [_vector_bytes(v) for v in embeddings]
                )
                try:
                    self.mirror.apply(
                        kind,
                        op,
                        ids,
                        _listed(metadatas, len(ids)),
                        _listed(documents, len(ids)),
                        self.stamp(),
                        vectors,
                    )
                except (sqlite3.Error, OSError):
                    self._drop_mirror()
            return result

    def drain(self) -> None:
        """Apply the queue of small writes to Chroma, oldest first, and empty it. A paper's
        write is stamped as applied now, so views refreshing from stamps take it in."""
        pending = self.pending
        if pending is None or self._client is None or not pending.waiting():
            return
        try:
            with self.write_lock():
                writes = pending.writes()
                if not writes:
                    return
                now = time.time()
                self._draining = True
                for w in writes:
                    call: dict[str, Any] = {"ids": w.ids}
                    if w.metadatas is not None:
                        stamped = [_restamped(m, now) for m in w.metadatas]
                        call["metadatas"] = stamped if w.kind == PAPERS else w.metadatas
                    if w.documents is not None:
                        call["documents"] = w.documents
                    if w.kind == META and w.op == "upsert":
                        call["embeddings"] = [[0.0]] * len(w.ids)
                    self._write_call(w.kind, w.op, stored=True, **call)  # as queued: stored keys
                pending.remove_through(writes[-1].seq)
                self._draining = False
                self._refused = None
        except StoreError as exc:
            if not (isinstance(exc, ReadOnlyError) or is_disk_full(exc)):
                raise
            # A store that cannot be written keeps its queue: reads come from the mirror, which
            # has it, and writes are refused until it is applied (they would come before it).
            self._refused = exc
        finally:
            self._draining = False

    def refusal(self, exc: BaseException) -> StoreError | None:
        """The error in words for a Chroma error that means the store cannot be written (its
        folder removed, its disk full, read-only), or None for any other error."""
        if isinstance(exc, TriageError):
            return None
        refused = server_refusal(exc, self.settings) if self.settings.chroma_url else None
        if refused is not None:
            return refused
        if self.path is not None and not self.path.is_dir():
            return store_gone(self.location)
        if is_disk_full_at(exc, self.path):
            return disk_full(self.location, self.path)
        if is_read_only(exc):
            return read_only(self.location)
        return None

    @property
    def cache_key(self) -> str:
        """Names this store, as this person sees it (`assistant.store.people`), for caches of
        derived state. The collection's id is new whenever a collection is created: two
        projects with a store at the same relative path, or a store deleted and rebuilt, never
        share a cache."""
        return self.data_key + self.view.tag

    @property
    def data_key(self) -> str:
        """Names this store for caches of what is the same for every person (the papers' text
        features)."""
        if self._client is None:
            now = self.stamp()
            if now is not None:
                return f"{self.location}#{self._names[0]}#{now[2]}"
        self._ensure_connected()
        return f"{self.location}#{self._names[0]}#{self._collections[PAPERS].id}"

    def update_stored(self, metadatas: dict[str, dict[str, Any]]) -> None:
        """Write papers' metadata keys as stored (everyone's, `assistant.store.people`)."""
        if metadatas:
            self._write_call(
                PAPERS, "update", stored=True, ids=list(metadatas), metadatas=list(metadatas.values())
            )

    def get_stored(self, **call: Any) -> Any:
        """`get` of papers with every person's keys as stored, `where` on them too
        (`assistant.store.people`): what the lab's views read."""
        return cast("_Routed", self.collection).get(stored=True, **call)

    # -- the writer lock -------------------------------------------------------

    def paced(self, took: float) -> None:
        """Wait after a request to the server that took `took` seconds (`Pacer.after`). A
        request made holding the writer lock owes its wait until the lock is let go: the other
        writers on this machine (`daily`, the review UIs) never wait on a niced one's pause."""
        if self.pace is None or not (wait := self.pace.after(took)):
            return
        if self._holder == threading.get_ident():
            self._owed += wait
        else:
            self.pace.wait(wait, time.sleep)

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the store's writer lock: across processes on this machine, one at a time
        (deduplicating and upserting must see what the other writer just stored). A lock
        that cannot be made (a read-only store) is not taken: the write itself then fails.
        Re-entrant: a write inside a held lock does not wait for itself.

        Every write to the collections takes it, not only those that must see each other's
        results: an embedded store's processes each apply the shared write log to the store,
        and two applying at once can apply an older write after a newer one (a paper taken
        out of a list came back). The mirror and the queue of small writes change under it."""
        if self.lock_path is None:
            yield
            return
        with self._thread_lock:
            if self._holder is not None:  # this thread's own: _thread_lock is re-entrant
                yield
                return
            if self.path is not None and not self.path.is_dir():
                raise store_gone(self.location)  # its lock file would make the folder again
            try:
                with _file_lock(self.lock_path, make_dir=self.path is None):
                    self._holder = threading.get_ident()
                    try:
                        yield
                    finally:
                        self._holder = None
            finally:
                owed, self._owed = self._owed, 0.0
        if owed and self.pace:
            self.pace.wait(owed, time.sleep)  # the requests' pauses made under the lock, once it is let go


def _restamped(meta: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """A queued paper's write stamped as applied now: its stamp (`touched`, or the agenda's
    whose assessment it writes), `touched` if it carries none."""
    meta = dict(meta or {})
    stamps = [k for k in meta if stamp_key(k)] or [STAMP]
    return {**meta, **dict.fromkeys(stamps, now)}


def _overlay(rows: list[Row], writes: Sequence[Write]) -> list[Row]:
    """Records read from Chroma with the queue's writes made on them, as Chroma will make them."""
    records: dict[tuple[int, str], list[Any]] = {(r[0], r[1]): list(r) for r in rows}
    for w in writes:
        for i, pid in enumerate(w.ids):
            key = (w.kind, pid)
            if w.op == "delete":
                records.pop(key, None)
                continue
            if key not in records:
                if w.op != "upsert":
                    continue  # an update of a record Chroma does not have
                records[key] = [w.kind, pid, None, None, None]
            record = records[key]
            meta = dict(record[3] or {})
            for name, value in ((w.metadatas[i] if w.metadatas else None) or {}).items():
                if value is None:
                    meta.pop(name, None)
                else:
                    meta[name] = value
            record[3] = meta or None
            if w.documents is not None:
                record[2] = w.documents[i]
    return [(r[0], r[1], r[2], r[3], r[4]) for r in records.values()]


def store_stamp(state: ChromaState | None, pending: Pending) -> Stamp | None:
    """An embedded store's stamp: the state of its Chroma database (`chroma_state`) and the
    number of the last write its queue ever took (None when either cannot be read)."""
    if state is None:
        return None
    try:
        return (*state, pending.last())
    except sqlite3.Error:
        return None


def local_stamp(settings: Settings) -> Stamp | None:
    """The stamp of the embedded store the settings point at, read without opening it (None
    for a server store or one that cannot be read)."""
    if settings.chroma_url or settings.local_store is None:
        return None
    names = (settings.collection, settings.collection + META_COLLECTION_SUFFIX)
    queue = Pending(settings.store)
    try:
        return store_stamp(chroma_state(settings.store, names), queue)
    finally:
        queue.close()


def _vector_bytes(vector: Any) -> bytes | None:
    """A vector as the mirror keeps it: little-endian float32 bytes."""
    if vector is None or not len(vector):
        return None
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def _listed(values: Any, n: int) -> list[Any] | None:
    """A call's per-record values as a list (Chroma also takes one value for one record)."""
    if values is None:
        return None
    if isinstance(values, dict | str):
        return [values] * n
    return list(values)


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
    from chromadb.config import Settings as ChromaSettings

    return ChromaSettings(anonymized_telemetry=False)
