"""The store contract; every test runs against the embedded store and a real Chroma server."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from assistant.config import Settings, load_settings
from assistant.errors import StoreError
from assistant.models import Assessment, Paper, Status, TopicScore
from assistant.store import Store


def paper(title: str, abstract: str = "", **kw: object) -> Paper:
    kw.setdefault("sources", ["test"])
    return Paper.create(title=title, abstract=abstract, **kw)


PAPERS = [
    paper(
        "Adapters for low-resource machine translation",
        "We train small adapter modules per language.",
        arxiv_id="2401.00001",
        year=2024,
        categories=["cs.CL"],
    ),
    paper("Protein folding with diffusion models", "Diffusion generates protein backbones.", year=2023),
    paper(
        "Attention heads that track syntax",
        "We probe attention heads for syntactic relations.",
        doi="10.1234/heads",
        year=2022,
    ),
]


def test_upsert_adds_then_reimport_adds_nothing(store: Store) -> None:
    report = store.upsert_papers(PAPERS)
    assert sorted(report.new) == sorted(p.id for p in PAPERS)
    again = store.upsert_papers(PAPERS)
    assert again.new == [] and again.merged == [] and len(again.unchanged) == 3
    assert store.count() == 3


def test_merge_fills_fields_and_keeps_decision_and_assessment(store: Store) -> None:
    store.upsert_papers(PAPERS)
    pid = PAPERS[0].id
    store.update_decision(pid, status=Status.ACCEPTED, starred=True, note="read first")
    store.set_assessment(
        pid,
        Assessment(
            engine="offline",
            relevance=7.5,
            tags=["adapters"],
            topics=[TopicScore(topic="A", score=8, reason="r")],
        ),
    )
    richer = paper(
        "Adapters for Low-Resource Machine Translation",
        "We train small adapter modules per language, and share them across related languages.",
        arxiv_id="arXiv:2401.00001v2",
        venue="ACL",
        sources=["bib"],
    )
    report = store.upsert_papers([richer])
    assert report.merged == [pid]
    item = store.get(pid)
    assert item is not None
    assert item.paper.venue == "ACL" and "share them" in item.paper.abstract
    assert item.paper.sources == ["test", "bib"]
    assert (
        item.decision.status is Status.ACCEPTED
        and item.decision.starred
        and item.decision.note == "read first"
    )
    assert item.assessment is not None and item.assessment.relevance == 7.5


def test_search_finds_by_meaning_and_respects_filters(store: Store) -> None:
    store.upsert_papers(PAPERS)
    hits = store.search("proteins and structural biology", k=2)
    assert hits[0].item.paper.title.startswith("Protein folding")
    store.update_decision(PAPERS[2].id, status=Status.REJECTED)
    filtered = store.search("syntax in transformers", k=3, where={"status": "new"})
    assert PAPERS[2].id not in [h.item.paper.id for h in filtered]
    assert store.search("anything", k=5, where={"year": {"$gte": 2024}})[0].item.paper.year == 2024


def test_assessment_update_does_not_re_embed(store: Store) -> None:
    store.upsert_papers(PAPERS)
    before = store.embeddings([PAPERS[1].id])[PAPERS[1].id]
    store.set_assessment(PAPERS[1].id, Assessment(engine="offline", relevance=1.0))
    store.update_decision(PAPERS[1].id, status=Status.MAYBE)
    assert store.embeddings([PAPERS[1].id])[PAPERS[1].id] == before
    assert store.get(PAPERS[1].id).assessment.relevance == 1.0  # type: ignore[union-attr]


def test_counts_by_status(store: Store) -> None:
    store.upsert_papers(PAPERS)
    store.update_decision(PAPERS[0].id, status=Status.ACCEPTED)
    store.update_decision(PAPERS[1].id, status=Status.MAYBE)
    counts = store.counts_by_status()
    assert counts == {Status.NEW: 1, Status.ACCEPTED: 1, Status.REJECTED: 0, Status.MAYBE: 1}


def test_iterates_everything_in_pages(store: Store) -> None:
    many = [paper(f"Paper number {i} on topic {i % 7}") for i in range(45)]
    store.upsert_papers(many)
    seen = [item.paper.id for item in store.iter_all(page_size=10)]
    assert sorted(seen) == sorted(p.id for p in many)
    assert len(list(store.iter_ids(page_size=7))) == 45


def test_get_many_keeps_order_and_skips_unknown(store: Store) -> None:
    store.upsert_papers(PAPERS)
    ids = [PAPERS[2].id, "arxiv:0000.00000", PAPERS[0].id]
    assert [i.paper.id for i in store.get_many(ids)] == [PAPERS[2].id, PAPERS[0].id]


def test_unknown_id_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="no paper"):
        store.update_decision("arxiv:9999.99999", status=Status.ACCEPTED)


def test_store_wide_values_round_trip(store: Store) -> None:
    store.set_value("lists", {"to-read": "weekend"})
    assert store.get_value("lists") == {"to-read": "weekend"}
    assert store.get_value("missing") is None


def test_reopening_finds_the_same_papers(settings: Settings) -> None:
    Store.open(settings).upsert_papers(PAPERS)
    again = Store.open(settings)
    assert again.count() == 3
    assert again.search("adapter modules", k=1)[0].item.paper.arxiv_id == "2401.00001"


def test_unreachable_server_is_a_clear_error(tmp_path: object) -> None:
    from assistant.config import load_settings
    from conftest import free_port

    with pytest.raises(StoreError, match="Chroma server"):
        Store.open(load_settings(chroma_url=f"http://127.0.0.1:{free_port()}"))


class _Clock:
    """The time module as the store sees it, with its waits recorded instead of slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _Machine:
    """`/proc/stat` as the pacing reads it: `step` seconds of every CPU pass at each reading,
    kept busy by other processes or left idle."""

    def __init__(self, others_busy: bool, step: float = 1.0) -> None:
        self.others_busy = others_busy
        self.step = step
        self.seconds = self.busy = 0.0

    def __call__(self, cpus: set[int]) -> tuple[float, float]:
        self.seconds += self.step * len(cpus)
        if self.others_busy:
            self.busy += self.step * len(cpus)
        return (self.busy, self.seconds)


def test_a_niced_process_leaves_the_server_to_the_others(
    chroma_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch job run with `nice -n 10` on the lab's machine, while others keep its CPUs busy,
    waits after each request to the Chroma server 8.3 times as long as the request took (the
    share of a CPU Linux gives it beside a process not niced), so the review UIs and `daily`
    keep theirs; a process not niced, or an embedded store, never waits."""
    from assistant.store import connection, pacing

    clock = _Clock()
    monkeypatch.setattr(connection, "time", clock)
    monkeypatch.setattr(pacing, "cpu_seconds", _Machine(others_busy=True))
    monkeypatch.setattr(pacing, "SLICE", 3600.0)  # each pause in one piece
    server = load_settings(chroma_url=chroma_server, collection=f"paced-{uuid.uuid4().hex[:8]}")
    Store.open(server).upsert_papers([Paper.create(title="A paper on pacing")])
    monkeypatch.setattr(os, "getpriority", lambda *_: 10)
    store = Store.open(server)
    clock.waits.clear()
    started = time.monotonic()
    assert store.count() == 1 and [i.paper.title for i in store.iter_all()] == ["A paper on pacing"]
    took = time.monotonic() - started
    assert len(clock.waits) >= 2 and all(w > 0 for w in clock.waits)
    assert sum(clock.waits) <= (1.25**10 - 1) * took  # 8.3 times as long as the requests took
    assert sum(clock.waits) > took
    from assistant.store.pacing import niced_pace

    for niceness, pace in ((1, 0.25), (5, 2.05), (19, 68.39)):
        monkeypatch.setattr(os, "getpriority", lambda *_, n=niceness: n)
        assert niced_pace() == pytest.approx(pace, abs=0.01)
    monkeypatch.setattr(os, "getpriority", lambda *_: 10)
    # Under the writer lock it waits only once the lock is let go: no other writer on this
    # machine waits on its pauses.
    clock.waits.clear()
    with store.write_lock():
        store.count()
        store.count()
        assert clock.waits == []
    assert len(clock.waits) == 1 and clock.waits[0] > 0
    # A request that fails is not followed by a pause (a server that does not answer is said
    # after its timeout, not twice that).
    clock.waits.clear()
    with pytest.raises(Exception, match="where"):  # refused by the server
        store.collection.get(where={"$nope": 1})
    assert clock.waits == []
    embedded = Store.open(load_settings(store=tmp_path / "store"))
    embedded.upsert_papers([Paper.create(title="A paper on pacing")])
    clock.waits.clear()
    assert embedded.count() == 1 and not clock.waits
    monkeypatch.setattr(os, "getpriority", lambda *_: 0)
    assert Store.open(server).count() == 1 and not clock.waits


def test_a_niced_process_runs_at_full_speed_on_an_idle_machine(
    chroma_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like the kernel, which gives a niced process a CPU nobody else wants, a niced job waits
    only while others keep the machine busy: on the server's own machine left idle it stops
    waiting once a pause has shown so, looks again now and then, and waits again once others
    are working; a server on another machine, whose load it cannot see, is always paced."""
    from assistant.store import connection, pacing

    clock = _Clock()
    monkeypatch.setattr(connection, "time", clock)
    machine = _Machine(others_busy=False)
    monkeypatch.setattr(pacing, "cpu_seconds", machine)
    monkeypatch.setattr(pacing, "PROBE_EVERY", 3600.0)
    monkeypatch.setattr(pacing, "SLICE", 3600.0)
    server = load_settings(chroma_url=chroma_server, collection=f"idle-{uuid.uuid4().hex[:8]}")
    Store.open(server).upsert_papers([Paper.create(title="Read while nobody works")])
    monkeypatch.setattr(os, "getpriority", lambda *_: 10)
    store = Store.open(server)  # its first request waits: the machine is not seen yet
    assert len(clock.waits) >= 1
    clock.waits.clear()
    assert store.count() == 1 and [i.paper.title for i in store.iter_all()] == ["Read while nobody works"]
    assert clock.waits == []
    machine.others_busy = True  # someone starts `daily`
    store.count()
    assert clock.waits == []  # not looked at again yet
    monkeypatch.setattr(pacing, "PROBE_EVERY", 0.0)
    store.count()
    assert clock.waits == [pacing.PROBE]  # a look: the others are working
    store.count()
    store.count()
    assert len(clock.waits) == 3 and all(w > 0 for w in clock.waits)
    assert pacing.on_this_machine(chroma_server) and pacing.on_this_machine("http://localhost:8000")
    assert not pacing.on_this_machine("http://192.0.2.1:8000")  # TEST-NET-1: nobody's address
    assert not pacing.on_this_machine("http://no-such-host.invalid:8000")
    assert pacing.on_this_machine(chroma_server.split("://")[1])  # as `--chroma-url` takes it too
    machine.others_busy = False
    elsewhere = pacing.Pacer("http://192.0.2.1:8000")
    for _ in range(3):
        elsewhere.wait(0.0, lambda _: None)
        assert elsewhere.after(0.1) == pytest.approx(0.1 * (1.25**10 - 1))


def test_a_niced_process_looks_at_the_machine_in_long_and_short_pauses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long pause (nice 19 after a two-second read: over two minutes) is made a second at a
    time, and what is left of it is not made once the others have stopped; pauses too short for
    `/proc/stat` to tell are added up first; one look is owed however many requests are made
    under the writer lock; `/proc/stat` is read as Linux writes it."""
    from assistant.store import pacing

    monkeypatch.setattr(os, "getpriority", lambda *_: 19)
    machine = _Machine(others_busy=True)
    monkeypatch.setattr(pacing, "cpu_seconds", machine)
    pacer = pacing.Pacer("http://127.0.0.1:8000")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            machine.others_busy = False  # `daily` ends during the third second

    wait = pacer.after(2.0)
    assert wait == pytest.approx(2.0 * (1.25**19 - 1))  # 137 s
    pacer.wait(wait, sleep)
    assert slept == [1.0, 1.0, 1.0] and not pacer.busy
    assert pacer.after(2.0) == 0.0
    # A look every PROBE_EVERY seconds, one however many requests follow (under the lock, where
    # the waits are added up).
    monkeypatch.setattr(pacing, "PROBE_EVERY", 0.0)
    assert pacer.after(0.01) == pacing.PROBE
    monkeypatch.setattr(pacing, "PROBE_EVERY", 3600.0)
    assert sum(pacer.after(0.01) for _ in range(200)) == 0.0
    # Short pauses: a reading of a hundredth of a second tells nothing until they add up.
    machine.step, machine.others_busy = 0.01, True
    pacer.busy = True
    pacer.wait(0.01, lambda _: None)
    assert pacer.busy  # not judged yet: busy as it was
    machine.others_busy = False
    for _ in range(30):
        pacer.wait(0.01, lambda _: None)
    assert not pacer.busy
    monkeypatch.undo()
    if Path("/proc/stat").exists() and hasattr(os, "sched_getaffinity"):
        cpus = os.sched_getaffinity(0)
        busy, total = pacing.cpu_seconds(cpus) or (0.0, 0.0)
        assert 0 <= busy <= total and total > 0
        assert pacing.cpu_seconds({max(cpus) + 4096}) is None  # a CPU the machine does not have
