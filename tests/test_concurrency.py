"""Several processes writing one store at once (embedded and on a Chroma server): nothing that
one of them reported done may be missing afterwards."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

from assistant.config import Settings, load_settings
from assistant.lists import ReadingLists
from assistant.models import Paper
from assistant.store import LEGACY_LIST_TABLE, Store
from conftest import sample_records, write_lines

WRITERS = 3
LISTS_EACH = 8
PAPERS = 6


def _settings(spec: dict[str, Any]) -> Settings:
    return load_settings(**spec)


def _spec(settings: Settings) -> dict[str, Any]:
    if settings.chroma_url:
        return {"chroma_url": settings.chroma_url, "collection": settings.collection, "store": settings.store}
    return {"store": settings.store}


def _together(target: Any, args: list[tuple[Any, ...]]) -> None:
    """Start one process per argument tuple, let them all go at once, and wait for them (each
    gets a queue to say it is ready and an event to wait for)."""
    ctx = mp.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*a, ready, go)) for a in args]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=120)
    go.set()
    for proc in procs:
        proc.join(180)
        assert proc.exitcode == 0


def _list_writer(spec: dict[str, Any], k: int, ids: list[str], ready: Any, go: Any) -> None:
    lists = ReadingLists(Store.open(_settings(spec)))
    ready.put(k)
    go.wait(60)
    for i in range(LISTS_EACH):
        name = f"writer {k} list {i}"
        lists.create(name, f"made by writer {k}")
        # Every writer files the same papers at the same time, each into its own lists.
        lists.add(name, ids)
        if i % 2:
            lists.remove(name, ids[:1])


def test_parallel_list_writers_lose_no_list_and_no_membership(settings: Settings) -> None:
    store = Store.open(settings)
    papers = [Paper.create(title=f"Shared paper number {chr(65 + i)}", sources=["t"]) for i in range(PAPERS)]
    store.upsert_papers(papers)
    ids = [p.id for p in papers]
    _together(_list_writer, [(_spec(settings), k, ids) for k in range(WRITERS)])
    lists = ReadingLists(Store.open(settings))
    names = {rl.name for rl in lists.all()}
    expected = {f"writer {k} list {i}" for k in range(WRITERS) for i in range(LISTS_EACH)}
    assert names == expected, f"lost: {sorted(expected - names)}"
    for k in range(WRITERS):
        for i in range(LISTS_EACH):
            name = f"writer {k} list {i}"
            want = set(ids[1:] if i % 2 else ids)
            assert set(lists.members(name)) == want, name
    for item in store.get_many(ids):
        assert len(item.decision.lists) == WRITERS * LISTS_EACH - (WRITERS * LISTS_EACH // 2) * (
            item.paper.id == ids[0]
        )


def test_a_store_with_the_old_list_table_is_converted(tmp_path: Path) -> None:
    """Stores made before per-list records kept every list in one value and each paper's lists
    in one key: opening one moves both, and nothing is lost."""
    settings = load_settings(store=tmp_path / "store")
    store = Store.open(settings)
    a, b = (
        Paper.create(title="Old paper one", sources=["t"]),
        Paper.create(title="Old paper two", sources=["t"]),
    )
    store.upsert_papers([a, b])
    store.set_value(
        LEGACY_LIST_TABLE,
        {
            "Reading group": {
                "name": "Reading group",
                "description": "Thursdays",
                "created_at": "2025-01-01T00:00:00Z",
            },
            "Zürich": {"name": "Zürich", "description": "", "created_at": "2025-01-02T00:00:00Z"},
        },
    )
    store.collection.update(
        ids=[a.id, b.id], metadatas=[{"lists": ["Reading group", "Zürich"]}, {"lists": ["Zürich"]}]
    )
    lists = ReadingLists(Store.open(settings))
    assert [(rl.name, rl.description) for rl in lists.all()] == [
        ("Reading group", "Thursdays"),
        ("Zürich", ""),
    ]
    assert lists.members("Reading group") == [a.id]
    assert sorted(lists.members("Zürich")) == sorted([a.id, b.id])
    assert store.get_value(LEGACY_LIST_TABLE) is None
    assert "lists" not in json.dumps(store.collection.get(ids=[a.id])["metadatas"][0]).replace('"list:', "")
    lists.remove("Zürich", [a.id])
    item = store.get(a.id)
    assert item is not None and item.decision.lists == ["Reading group"]


def _ingester(spec: dict[str, Any], path: str, ready: Any, go: Any) -> None:
    from assistant.ingest import ingest_files

    store = Store.open(_settings(spec))
    ready.put(path)
    go.wait(60)
    (report,) = ingest_files(store, [Path(path)])
    assert report.error is None and not report.skipped


def test_two_ingests_of_the_same_papers_at_once_make_each_paper_once(
    settings: Settings, tmp_path: Path
) -> None:
    """One file with DOIs, one without, imported at the same moment: both resolve against the
    store before either has written unless the writers take turns."""
    records = sample_records(60)
    with_doi = [{**r, "doi": f"10.5555/drill.{i}"} for i, r in enumerate(records)]
    first = write_lines(tmp_path / "with-doi.jsonl", [json.dumps(r) for r in with_doi])
    second = write_lines(tmp_path / "without.jsonl", [json.dumps(r) for r in records])
    _together(_ingester, [(_spec(settings), str(p)) for p in (first, second)])
    store = Store.open(settings)
    assert store.count() == len(records)
    assert all(item.paper.doi for item in store.iter_all())


def test_an_import_merges_duplicates_that_slipped_in(settings: Settings, tmp_path: Path) -> None:
    """Writers that do not share the lock (two machines on one Chroma server) can each make a
    paper: the next import that meets the paper merges the two, keeping both decisions' parts."""
    from assistant.index import QueueIndex
    from assistant.ingest import ingest_files
    from assistant.models import Status

    store = Store.open(settings)
    title = "Sparse Upcycling of Dense Checkpoints into Mixtures of Experts"
    store.upsert_papers([Paper.create(title=title, doi="10.5555/upcycle", sources=["a"])])
    store.upsert_papers(
        [Paper.create(title=title, abstract="The abstract.", sources=["b"])]
    )  # no lock, no dedupe
    assert store.count() == 2
    index = QueueIndex(location="test")
    index.build(store)
    doi_id, title_id = "doi:10.5555/upcycle", Paper.create(title=title).id
    store.update_decision(doi_id, status=Status.ACCEPTED, note="from machine one")
    store.update_decision(title_id, note="from machine two", tags=["moe"])
    ReadingLists(store).create("Reading group")
    ReadingLists(store).add("Reading group", [title_id])
    path = write_lines(tmp_path / "again.jsonl", [json.dumps({"title": title, "year": 2023})])
    (report,) = ingest_files(store, [path])
    assert report.error is None and store.count() == 1
    (item,) = list(store.iter_all())
    assert item.paper.id == doi_id and item.paper.abstract == "The abstract." and item.paper.year == 2023
    assert item.decision.status is Status.ACCEPTED
    assert item.decision.note == "from machine one\nfrom machine two"
    assert item.decision.tags == ["moe"] and item.decision.lists == ["Reading group"]
    log = store.merge_log(doi_id)
    assert log is not None and "same time" in log.entries[0].how
    rows, _, gone = index.changes(store)
    assert gone == [title_id]
    index.apply(rows)
    index.remove(gone)
    assert set(index.rows) == {doi_id}


def test_an_import_embeds_its_papers_without_holding_the_writer_lock(
    embedded_settings: Settings, tmp_path: Path
) -> None:
    """Every write waits for the store's writer lock, a decision in the review UI too: an import
    running in another process must not hold it while it embeds (seconds per chunk), only to
    look its papers up again and write them. Each paper is still embedded once."""
    import fcntl

    from assistant.ingest import ingest_files

    store = Store.open(embedded_settings)
    assert store.lock_path is not None
    lock_path, embed = store.lock_path, store.embedder
    embedded: list[str] = []
    lock_free: list[bool] = []

    def watched(texts: list[str]) -> Any:
        with open(lock_path, "a+b") as handle:  # what another process's write would try
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                lock_free.append(True)
            except BlockingIOError:
                lock_free.append(False)
        embedded.extend(texts)
        return embed(texts)

    store.embedder = watched
    records = sample_records(12)
    path = write_lines(tmp_path / "papers.jsonl", [json.dumps(r) for r in records])
    (report,) = ingest_files(store, [path])
    assert report.error is None and report.new == len(records) and store.count() == len(records)
    assert lock_free and all(lock_free)
    assert len(embedded) == len(records) == len(set(embedded))
