"""The store's mirror and its queue of small writes: commands of the daily loop read and make
small writes without opening Chroma, and never see or leave a state Chroma would not."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import chromadb
import pytest

from assistant.config import load_settings
from assistant.models import Decision, Paper, Status
from assistant.store import Store
from assistant.store.mirror import META, PAPERS, Mirror, matcher
from conftest import sample_records

CHROMA_SETTINGS = chromadb.config.Settings(anonymized_telemetry=False)

RECORDS: list[dict[str, Any]] = [
    {"k": 1, "s": "q", "l": ["u", "v"], "b": True, "relevance": 7.5, "status": "accepted", "touched": 10.0},
    {"k": 2.5, "status": "new", "starred": True, "touched": 3, "a:h:touched": 1.0},
    {"s": "r", "b": False, "relevance": 0.0, "status": "rejected", "l": ["w"], "a:h:touched": 9.0},
    {"k": 0, "relevance": -1.0, "status": "new", "touched": 7.5},
]
WHERES: list[dict[str, Any]] = [
    {"s": {"$ne": "q"}},
    {"b": True},
    {"b": 1},
    {"k": 1},
    {"k": {"$gte": 1}},
    {"k": {"$gt": 2}},
    {"k": {"$in": [1.0, 0.0]}},
    {"s": {"$nin": ["q"]}},
    {"l": {"$contains": "u"}},
    {"relevance": {"$gte": 0}},
    {"relevance": {"$gte": 0.0}},
    {"starred": True},
    {"status": {"$in": ["accepted", "rejected"]}},
    {"$or": [{"status": "accepted"}, {"starred": True}]},
    {"$and": [{"relevance": {"$gte": 0.0}}, {"status": {"$ne": "new"}}]},
    {"$or": [{"status": {"$ne": "new"}}, {"starred": True}]},
    {"touched": {"$gt": 5.0}},
    {"touched": {"$gt": 2.5}},
    {"touched": {"$gt": 8.0}},
    {"a:h:touched": {"$gt": 0.5}},
    {"$or": [{"touched": {"$gt": 5.0}}, {"a:h:touched": {"$gt": 5.0}}]},
    {"$or": [{"touched": {"$gt": 2.0}}, {"a:h:touched": {"$gt": 2.0}}]},
]


def test_the_mirror_filters_as_chroma_does(tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=CHROMA_SETTINGS)
    collection = client.get_or_create_collection("probe", embedding_function=None)
    ids = [f"p{i}" for i in range(len(RECORDS))]
    collection.add(ids=ids, embeddings=[[1.0, float(i)] for i in range(len(ids))], metadatas=RECORDS)  # type: ignore[arg-type]
    mirror = Mirror(tmp_path / "mirror.sqlite3")
    rows = [(PAPERS, pid, None, dict(meta), None) for pid, meta in zip(ids, RECORDS, strict=True)]
    mirror.rebuild(rows, (0, 0, "", "", 0, 0))
    for where in WHERES:
        assert mirror.get(PAPERS, where=where)["ids"] == collection.get(where=where)["ids"], where
        assert [pid for pid, meta in zip(ids, RECORDS, strict=True) if matcher(where)(meta)] == mirror.get(
            PAPERS, where=where
        )["ids"]
    # Updates merge keys and None removes one; an update of an unknown id is ignored; paging.
    for target in (collection, None):
        call: dict[str, Any] = {"ids": ["p0", "zz"], "metadatas": [{"k": None, "n": 3}, {"a": 1}]}
        if target is None:
            mirror.apply(PAPERS, "update", **call)
        else:
            target.update(**call)
    assert mirror.get(PAPERS, ids=["p0"])["metadatas"] == collection.get(ids=["p0"])["metadatas"]
    assert mirror.get(PAPERS, ids=["p3", "p0", "zz"])["ids"] == collection.get(ids=["p3", "p0", "zz"])["ids"]
    page = {"limit": 2, "offset": 1, "include": []}
    assert mirror.get(PAPERS, **page)["ids"] == collection.get(**page)["ids"]  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unique"):
        mirror.get(PAPERS, ids=["p0", "p0"])


def _store(tmp_path: Path, n: int = 6) -> tuple[Store, list[str]]:
    store = Store.open(load_settings(store=tmp_path / "store"))
    report = store.upsert_papers(
        [Paper.create(title=str(r["title"]), abstract=str(r["abstract"])) for r in sample_records(n)]
    )
    return store, report.new


def _run(tmp_path: Path, code: str, exit_code: int = 0) -> str:
    """Python code run as its own process against the test's store; its output."""
    script = (
        f"import sys\nfrom assistant.config import load_settings\nfrom assistant.store import Store\n{code}"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "store")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == exit_code, done.stderr
    return done.stdout


OPEN = "store = Store.open(load_settings(store=sys.argv[1]))\n"


def test_small_writes_are_queued_without_chroma_and_reach_it_in_order(tmp_path: Path) -> None:
    _, ids = _store(tmp_path)
    # A process that only decides: Chroma is neither imported nor opened; the write waits in the queue.
    out = _run(
        tmp_path,
        OPEN + "from assistant.models import Status\n"
        f"store.set_status([{ids[0]!r}], Status.ACCEPTED)\n"
        f"store.set_memberships({{{ids[1]!r}: {{'later': True}}}})\n"
        f"store.update_decision({ids[0]!r}, note='first')\n"
        f"store.update_decision({ids[0]!r}, note='second')\n"
        "store.put_named_record('list', {'name': 'later', 'description': 'd'})\n"
        "print(store.connected, 'chromadb' in sys.modules, store.pending.waiting())",
    )
    assert out.split() == ["False", "False", "True"]
    # Another process reading without Chroma sees every write, in order.
    out = _run(
        tmp_path,
        OPEN + f"p = store.get({ids[0]!r}); q = store.get({ids[1]!r})\n"
        "lists = sorted(store.named_records('list'))\n"
        "print(p.decision.status.value, p.decision.note, q.decision.lists, lists, store.connected)",
    )
    assert out.split() == ["accepted", "second", "['later']", "['later']", "False"]
    # Chroma, once opened (a search), has the queue applied and the queue is empty.
    _run(tmp_path, OPEN + "store.collection.peek(1)\nassert not store.pending.waiting()")
    client = chromadb.PersistentClient(path=str(tmp_path / "store"), settings=CHROMA_SETTINGS)
    meta = client.get_collection("papers").get(ids=[ids[0]])["metadatas"][0]  # type: ignore[index]
    assert meta["status"] == "accepted" and meta["note"] == "second"


def test_a_write_by_another_program_makes_the_mirror_stale_and_it_is_rebuilt(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    del store
    client = chromadb.PersistentClient(path=str(tmp_path / "store"), settings=CHROMA_SETTINGS)
    client.get_collection("papers").update(ids=[ids[2]], metadatas=[{"status": "rejected"}])
    out = _run(tmp_path, OPEN + f"print(store.connected, store.get({ids[2]!r}).decision.status.value)")
    assert out.split() == ["True", "rejected"]  # opened Chroma to rebuild the mirror
    out = _run(tmp_path, OPEN + f"print(store.connected, store.get({ids[2]!r}).decision.status.value)")
    assert out.split() == ["False", "rejected"]


def test_a_queued_decision_and_a_later_direct_one_keep_their_order(tmp_path: Path) -> None:
    _, ids = _store(tmp_path)
    _run(
        tmp_path,
        OPEN + f"from assistant.models import Status\nstore.set_status([{ids[0]!r}], Status.REJECTED)",
    )
    # A process with Chroma open (an import) decides the same paper later: its write wins.
    _run(
        tmp_path,
        OPEN + "from assistant.models import Status\nstore.collection.peek(1)\n"
        f"store.set_status([{ids[0]!r}], Status.ACCEPTED)",
    )
    out = _run(tmp_path, OPEN + f"print(store.get({ids[0]!r}).decision.status.value)")
    assert out.strip() == "accepted"


def test_a_damaged_mirror_is_rebuilt_and_a_deleted_one_too(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    store.set_decisions({ids[0]: Decision(status=Status.MAYBE, note="kept")})
    path = store.mirror.path if store.mirror else None
    assert path is not None and path.exists()
    del store
    path.write_bytes(b"not a database" * 100)
    out = _run(tmp_path, OPEN + f"d = store.get({ids[0]!r}).decision; print(d.status.value, d.note)")
    assert out.split() == ["maybe", "kept"]
    path.unlink()
    out = _run(tmp_path, OPEN + f"d = store.get({ids[0]!r}).decision; print(d.status.value, store.count())")
    assert out.split() == ["maybe", "6"]


def test_the_cli_marks_without_chroma(tmp_path: Path) -> None:
    _store(tmp_path)
    store_dir = str(tmp_path / "store")
    listed = subprocess.run(
        [sys.executable, "-m", "assistant", "--store", store_dir, "list", "create", "later"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    first = json.loads(
        subprocess.run(
            [sys.executable, "-m", "assistant", "--store", store_dir, "export", "-f", "jsonl"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.splitlines()[0]
    )
    pid = first["paper"]["id"] if "paper" in first else first["id"]
    for args in (
        ["mark", pid, "--accept"],
        ["note", pid, "read on the train"],
        ["list", "add", "later", pid],
    ):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "assistant", "--store", store_dir, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert not any(line.rstrip().endswith("| chromadb") for line in done.stderr.splitlines()), args
    shown = subprocess.run(
        [sys.executable, "-m", "assistant", "--store", store_dir, "list", "show", "later"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert pid in shown
    assert META != PAPERS


def test_search_reads_the_mirror_and_finds_what_chroma_finds(tmp_path: Path) -> None:
    store, ids = _store(tmp_path, 12)
    store.set_status(ids[:4], Status.ACCEPTED)
    del store
    code = (
        OPEN + "hits = store.search('multilingual language models for African languages', k=5)\n"
        "kept = store.search('language models', k=3, where={'status': 'accepted'})\n"
        "print(store.connected, 'chromadb' in sys.modules)\n"
        "print(' '.join(f'{h.item.paper.id}:{h.distance:.4f}' for h in hits))\n"
        "print(' '.join(h.item.paper.id for h in kept))\n"
        "print(' '.join(h.item.paper.id for h in store.neighbours(hits[0].item.paper.id, k=3)))"
    )
    lines = _run(tmp_path, code).splitlines()
    assert lines[0].split() == ["False", "False"]
    chroma = Store.open(load_settings(store=tmp_path / "store"))
    chroma._connect()
    chroma.mirror = None  # every read through Chroma now
    expected = chroma.search("multilingual language models for African languages", k=5)
    got = [(pair.rsplit(":", 1)[0], float(pair.rsplit(":", 1)[1])) for pair in lines[1].split()]
    assert [pid for pid, _ in got] == [h.item.paper.id for h in expected]
    assert all(abs(d - h.distance) < 1e-3 for (_, d), h in zip(got, expected, strict=True))
    accepted = chroma.search("language models", k=3, where={"status": "accepted"})
    assert lines[2].split() == [h.item.paper.id for h in accepted] and set(lines[2].split()) <= set(ids[:4])
    assert lines[3].split() == [h.item.paper.id for h in chroma.neighbours(got[0][0], k=3)]


def test_a_queued_assessment_for_another_agenda_is_stamped_for_that_agenda_when_applied(
    tmp_path: Path,
) -> None:
    from assistant.agenda import parse_agenda
    from assistant.triage.batch import tag_offline

    _, ids = _store(tmp_path)
    a_md, b_md = tmp_path / "a.md", tmp_path / "b.md"
    a_md.write_text("# A\n\n## Adapters\n\nAdapters and LoRA.\n", encoding="utf-8")
    b_md.write_text("# B\n\n## Routing\n\nMixture-of-experts routing.\n", encoding="utf-8")
    alice = load_settings(store=tmp_path / "store", user="alice", agenda=a_md)
    tagged = Store.open(alice)
    tag_offline(tagged, parse_agenda(a_md.read_text(encoding="utf-8")))
    tagged.collection.peek(1)  # the plain agenda's assessments applied (and stamped) now
    before = time.time()
    time.sleep(0.05)
    # Bob (another agenda) assesses a paper in a process that never opens Chroma: queued.
    out = _run(
        tmp_path,
        f"store = Store.open(load_settings(store=sys.argv[1], user='bob', agenda={str(b_md)!r}))\n"
        "from assistant.models import Assessment\n"
        f"store.set_assessments({{{ids[0]!r}: Assessment(engine='offline', relevance=4.0, key='k')}})\n"
        "print(store.view.slot is not None, store.connected, store.pending.waiting())",
    )
    assert out.split() == ["True", "False", "True"]
    time.sleep(0.05)
    applied = time.time()
    bob = Store.open(load_settings(store=tmp_path / "store", user="bob", agenda=b_md))
    bob.collection.peek(1)  # opens Chroma: the queue is applied
    assert bob.pending is not None and not bob.pending.waiting()
    client = chromadb.PersistentClient(path=str(tmp_path / "store"), settings=CHROMA_SETTINGS)
    meta = client.get_collection("papers").get(ids=[ids[0]])["metadatas"][0]  # type: ignore[index]
    stamp = [k for k in meta if k.startswith("a:") and k.endswith(":touched")]
    assert len(stamp) == 1 and float(meta[stamp[0]]) >= applied  # type: ignore[arg-type]
    assert float(meta["touched"]) < before  # type: ignore[arg-type]
    assert [pid for pid, _ in bob.changed_since(before)] == [ids[0]]
    assert Store.open(alice).changed_since(before) == []


def test_a_drain_cut_short_is_applied_again_and_changes_nothing_twice(tmp_path: Path) -> None:
    """Killed after writing the queue to Chroma but before emptying it: the next process that
    opens Chroma applies it again, to the same result (a note is set, not appended)."""
    _, ids = _store(tmp_path)
    _run(
        tmp_path,
        OPEN + "from assistant.models import Status\n"
        f"store.set_status([{ids[0]!r}], Status.ACCEPTED)\n"
        f"store.update_decision({ids[1]!r}, note='once')\n",
    )
    _run(
        tmp_path,
        OPEN + "import os\nfrom assistant.store.pending import Pending\n"
        "Pending.remove_through = lambda self, seq: os._exit(9)\n"  # dies before emptying it
        "store.collection.peek(1)\n",
        exit_code=9,
    )
    out = _run(
        tmp_path,
        OPEN + "store.collection.peek(1)\n"
        f"a, b = store.get({ids[0]!r}), store.get({ids[1]!r})\n"
        "print(store.pending.waiting(), a.decision.status.value, repr(b.decision.note), store.count())",
    )
    assert out.split() == ["False", "accepted", "'once'", "6"]


def test_a_reader_that_stays_open_sees_what_other_processes_write(tmp_path: Path) -> None:
    """The review UI asks the same `where` again and again: another process's decision, and a
    rebuild of the mirror that renumbers its rows, are seen (never another paper's row)."""
    store, ids = _store(tmp_path)
    since = time.time()
    assert store.count({"status": "accepted"}) == 0 and not store.changed_since(since)
    _run(
        tmp_path,
        OPEN + f"from assistant.models import Status\nstore.set_status([{ids[0]!r}], Status.ACCEPTED)",
    )
    assert store.count({"status": "accepted"}) == 1
    assert [pid for pid, _ in store.changed_since(since)] == [ids[0]]
    client = chromadb.PersistentClient(path=str(tmp_path / "store"), settings=CHROMA_SETTINGS)
    client.get_collection("papers").update(ids=[ids[3]], metadatas=[{"status": "accepted"}])
    _run(tmp_path, OPEN + "store.count()")  # a foreign write: this process rebuilds the mirror
    accepted = sorted(s.paper.id for s in store.iter_all({"status": "accepted"}))
    assert accepted == sorted([ids[0], ids[3]])
    assert all(s.decision.status is Status.ACCEPTED for s in store.iter_all({"status": "accepted"}))


def test_a_queue_the_disk_refuses_stays_first_and_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chroma refuses the queue (a full disk): reads still see the queued decision, and a later
    direct write is refused rather than made before it."""
    _, ids = _store(tmp_path)
    _run(
        tmp_path,
        OPEN + f"from assistant.models import Status\nstore.set_status([{ids[0]!r}], Status.REJECTED)",
    )
    from chromadb.api.models.Collection import Collection

    from assistant.errors import StoreError

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Collection, "update", full)
    store = Store.open(load_settings(store=tmp_path / "store"))
    store.collection.peek(1)  # opens Chroma: the drain is refused
    assert store.pending is not None and store.pending.waiting()
    assert store.get(ids[0]).decision.status is Status.REJECTED  # type: ignore[union-attr]
    with pytest.raises(StoreError):
        store.upsert_papers([Paper.create(title="Another paper", abstract="Text.")])
    monkeypatch.undo()
    out = _run(
        tmp_path, OPEN + f"store.collection.peek(1)\nprint(store.get({ids[0]!r}).decision.status.value)"
    )
    assert out.strip() == "rejected"
