"""People sharing one store (`--user` / TRIAGE_USER): each person's decisions, stars, notes and
lists apart, the papers and assessments shared; a store made by the last release before people
opens with its decisions as the first person's; shared lists show who added what."""

from __future__ import annotations

import csv
import io
import json
import tarfile
from datetime import date, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import Settings, load_settings, login_name
from assistant.lists import ListError, ReadingLists
from assistant.models import Paper, Status
from assistant.store import Store
from assistant.store.people import everyone

runner = CliRunner()
HERE = Path(__file__).parent
RELEASE_STORE = HERE / "fixtures" / "stores" / "release-0.1.0-d723daf.tar.gz"
# What that store holds (made with the release's commands: see tests/fixtures/stores/README.md).
ACCEPTED, REJECTED, MAYBE = "title:492e614b5a352bb3", "title:2ae92e1384f5ed1e", "title:8171977c119499f7"
LISTED = {ACCEPTED, "title:93e14bdd4518be57"}
ME = login_name()  # who made the demo store (its first person)


def triage(user: str, *args: str, ok: bool = True) -> str:
    result = runner.invoke(app, ["--user", user, *args], env={"COLUMNS": "200"})
    if ok:
        assert result.exit_code == 0, result.output
    return result.output


def exported(user: str, *args: str) -> dict[str, dict[str, str]]:
    """`export -f csv` as this person: {id: row}."""
    result = runner.invoke(app, ["--user", user, "export", "-f", "csv", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return {row["id"]: row for row in csv.DictReader(io.StringIO(result.stdout))}


def test_a_store_made_by_the_last_release_is_its_first_persons(isolated: Path) -> None:
    with tarfile.open(RELEASE_STORE) as archive:
        # The "data" filter where this Python has it (3.11.4 and later): our own archive either way.
        archive.extractall(isolated, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    # The first person to open it with this version takes over its decisions, note and list.
    alice = exported("alice")
    assert len(alice) == 6
    assert {pid: row["status"] for pid, row in alice.items() if row["status"] != "new"} == {
        ACCEPTED: "accepted",
        REJECTED: "rejected",
        MAYBE: "maybe",
    }
    assert alice[ACCEPTED]["starred"] == "yes"
    assert alice[ACCEPTED]["note"] == "read for the group"
    assert {pid for pid, row in alice.items() if "to-read" in row["lists"]} == LISTED
    # Someone else sees the same papers, assessed, and none of her decisions.
    bob = exported("bob")
    assert set(bob) == set(alice)
    assert {row["status"] for row in bob.values()} == {"new"}
    assert all(row["note"] == "" and row["lists"] == "" for row in bob.values())
    assert {pid: row["relevance"] for pid, row in bob.items()} == {
        pid: row["relevance"] for pid, row in alice.items()
    }
    assert "no reading list named 'to-read'" in triage("bob", "list", "show", "to-read", ok=False)
    # His decision on her accepted paper is his: hers stays.
    triage("bob", "mark", ACCEPTED, "--reject")
    triage("bob", "note", ACCEPTED, "not for me")
    assert exported("alice")[ACCEPTED]["status"] == "accepted"
    assert exported("alice")[ACCEPTED]["note"] == "read for the group"
    assert exported("bob")[ACCEPTED]["status"] == "rejected"
    assert set(exported("bob", "--status", "rejected")) == {ACCEPTED}
    assert set(exported("alice", "--status", "rejected")) == {REJECTED}
    # Each one's queue: the paper she accepted is still in his (undecided) queue, not in hers.
    assert ACCEPTED not in triage("alice", "ranked", "--top", "10")
    assert MAYBE in triage("bob", "ranked", "--top", "10")
    assert MAYBE not in triage("alice", "ranked", "--top", "10")


def paper(n: int, title: str) -> Paper:
    return Paper(id=f"arxiv:2501.0000{n}", title=title, abstract=f"{title}: what it does and how well.")


def test_two_people_deciding_the_same_papers_at_once_keep_their_own(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in experts")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    one, two = "arxiv:2501.00001", "arxiv:2501.00002"
    # Both decide the same paper in turns that interleave, each with the store open all along.
    alice.update_decision(one, status=Status.ACCEPTED, note="key paper")
    bob.update_decision(one, status=Status.REJECTED, starred=True)
    alice.update_decision(one, starred=False)
    bob.update_decision(two, status=Status.MAYBE, tags=["later"])
    a, b = alice.get(one), bob.get(one)
    assert a is not None and b is not None
    assert (a.decision.status, a.decision.starred, a.decision.note) == (Status.ACCEPTED, False, "key paper")
    assert (b.decision.status, b.decision.starred, b.decision.note) == (Status.REJECTED, True, "")
    assert list(alice.iter_ids({"status": "accepted"})) == [one]
    assert list(bob.iter_ids({"status": "accepted"})) == []
    assert alice.counts_by_status()[Status.NEW] == 1 and bob.counts_by_status()[Status.NEW] == 0
    assert sorted(bob.iter_ids({"$or": [{"status": "maybe"}, {"starred": True}]})) == [one, two]
    # A third person opening the store later sees everyone's papers and nobody's decisions.
    carol = Store.open(settings.model_copy(update={"user": "carol"}))
    assert carol.counts_by_status()[Status.NEW] == 2
    assert carol.people() == ("alice", ["alice", "bob", "carol"])
    # Who decided what, read from the stored keys.
    stored = dict(carol.iter_metadata(stored=True))[one]
    seen = everyone(stored, "alice")
    assert seen["alice"]["status"] == "accepted" and seen["bob"]["status"] == "rejected"
    assert "carol" not in seen


def test_merging_a_duplicate_keeps_everyones_decisions(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Adapters for everyone, again")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    keep, drop = "arxiv:2501.00001", "arxiv:2501.00002"
    alice.update_decision(keep, status=Status.ACCEPTED)
    bob.update_decision(drop, status=Status.REJECTED, note="seen it")
    carol = Store.open(settings.model_copy(update={"user": "carol"}))
    carol.update_decision(drop, status=Status.MAYBE)
    alice.absorb(keep, drop, "the same work")  # as an import that met the duplicate would
    assert [s.paper.id for s in alice.get_many([keep, drop])] == [keep]
    got = {
        who: Store.open(settings.model_copy(update={"user": who})).get(keep)
        for who in ("alice", "bob", "carol")
    }
    assert {who: (s.decision.status, s.decision.note) for who, s in got.items() if s} == {
        "alice": (Status.ACCEPTED, ""),
        "bob": (Status.REJECTED, "seen it"),
        "carol": (Status.MAYBE, ""),
    }
    # Merged by someone else than the store's first person: hers (the plain keys) stay too.
    alice.upsert_papers([paper(3, "Routing in experts"), paper(4, "Routing in experts, again")])
    alice.update_decision("arxiv:2501.00004", status=Status.ACCEPTED, starred=True)
    bob.absorb("arxiv:2501.00003", "arxiv:2501.00004", "the same work")
    merged = alice.get("arxiv:2501.00003")
    assert merged is not None and (merged.decision.status, merged.decision.starred) == (Status.ACCEPTED, True)
    theirs = bob.get("arxiv:2501.00003")
    assert theirs is not None and theirs.decision.status is Status.NEW


def test_a_delete_undone_puts_back_everyones_decisions(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    pid = "arxiv:2501.00001"
    alice.update_decision(pid, status=Status.ACCEPTED, note="hers")
    bob.update_decision(pid, status=Status.REJECTED, note="his")
    records = bob.records([pid])  # what the review UI keeps for `u`
    assert bob.delete_papers([pid]) == 1
    assert bob.restore_records(records) == [pid]
    for who, status, note in (("alice", Status.ACCEPTED, "hers"), ("bob", Status.REJECTED, "his")):
        item = Store.open(settings.model_copy(update={"user": who})).get(pid)
        assert item is not None and (item.decision.status, item.decision.note) == (status, note)


def test_lists_are_each_persons_own_unless_shared(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in experts")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    one, two = "arxiv:2501.00001", "arxiv:2501.00002"
    theirs = ReadingLists(alice), ReadingLists(bob)
    for lists, pid in zip(theirs, (one, two), strict=True):
        lists.create("to-read")
        lists.add("to-read", [pid])
    assert theirs[0].members("to-read") == [one] and theirs[1].members("to-read") == [two]
    # A shared list: everyone files into it, and it says who added what.
    theirs[0].create("reading group", shared=True)
    ReadingLists(bob).add("reading group", [one, two])  # bob opened before it existed
    ReadingLists(alice).remove("reading group", [two])
    carol = Store.open(settings.model_copy(update={"user": "carol"}))
    group = ReadingLists(carol)
    assert [rl.name for rl in group.all()] == ["reading group"]
    assert group.get("reading group").created_by == "alice"
    assert group.added_by("reading group") == {one: "bob"}
    item = carol.get(one)
    assert item is not None and item.decision.lists == ["reading group"]
    # Its name cannot be taken by anyone's own list, nor can an own list's name be shared.
    with pytest.raises(ListError, match="already exists"):
        group.create("reading group")
    with pytest.raises(ListError, match="alice has a reading list named 'to-read'"):
        group.create("to-read", shared=True)


def test_doctor_names_the_person_and_the_stores_people(demo_store: Path) -> None:
    triage("bob", "stats")
    assert f"bob (--user / TRIAGE_USER); the store's people: {ME} (first), bob" in said(
        triage("bob", "doctor")
    )


def test_a_user_name_that_cannot_name_a_person_is_one_line(demo_store: Path) -> None:
    result = runner.invoke(app, ["--user", "bob:admin", "stats"])
    assert result.exit_code == 1
    assert "the user name 'bob:admin' cannot name a person" in result.output
    assert "Traceback" not in result.output


AGENDA_B = """# Bob's agenda

## Mixture of experts

Sparse mixture-of-experts models: routing, load balancing, expert specialisation and the
cost of serving them.

## Evaluation

Benchmarks and how models are evaluated: contamination, robustness, human judgements.
"""


def said(output: str) -> str:
    """Output as one line of words (table borders dropped)."""
    return " ".join(output.replace("│", " ").split())


def test_assessments_are_kept_per_agenda(demo_store: Path) -> None:
    # The demo assessed the store against the example agenda, as this machine's login name (ME).
    pid = "title:492e614b5a352bb3"
    before = said(triage(ME, "show", pid))
    assert "Multilingual and low-resource language models" in before
    # Bob's agenda is another: nothing is assessed for it yet (filters and reads agree), and
    # his tagging assesses for it without touching anybody else's.
    Path("bob.md").write_text(AGENDA_B, encoding="utf-8")
    bob = ("bob", "--agenda", "bob.md")
    assert "not yet ('triage tag' does) 87" in said(triage(*bob, "stats"))
    assert "No assessed papers yet" in said(triage(*bob, "ranked"))
    assert "Assessed 87 papers" in said(triage(*bob, "tag"))
    assert "nothing to assess" in said(triage(*bob, "tag"))
    assert "stale ('triage tag' redoes) 0" in said(triage(*bob, "stats"))
    mine = said(triage(*bob, "show", pid))
    assert "Mixture of experts" in mine and "Multilingual and low-resource" not in mine
    assert said(triage(ME, "show", pid)) == before
    assert "stale ('triage tag' redoes) 0" in said(triage(ME, "stats"))
    # Carol reads with the example agenda: the lab's assessments, made once, are hers at once.
    assert "stale ('triage tag' redoes) 0" in said(triage("carol", "stats"))
    assert "nothing to assess" in said(triage("carol", "tag"))
    assert said(triage("carol", "show", pid)) == before


def test_one_person_editing_their_agenda_keeps_one_set_of_assessments(demo_store: Path) -> None:
    agenda = Path("agenda.md")
    agenda.write_text(agenda.read_text(encoding="utf-8") + "\n## Tokenizers\n\nSubword vocabularies.\n")
    assert "Assessed 87 papers" in said(triage(ME, "tag"))
    store = Store.open_for_reading(load_settings())
    stored = [meta for _, meta in store.iter_metadata(stored=True)]
    assert len(stored) == 87
    assert not [k for meta in stored for k in meta if k.startswith("a:")]
    assert all("Tokenizers" in str(meta["assessment"]) for meta in stored)


def test_the_lab_view_shows_who_accepted_what_and_disagreements(settings: Settings) -> None:
    papers = [paper(n, f"Paper number {n}") for n in range(1, 5)]
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers(papers)
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    carol = Store.open(settings.model_copy(update={"user": "carol"}))
    one, two, three, four = (p.id for p in papers)
    alice.update_decision(one, status=Status.ACCEPTED)
    bob.update_decision(one, status=Status.REJECTED)
    bob.update_decision(two, status=Status.ACCEPTED)
    carol.update_decision(two, status=Status.ACCEPTED)
    carol.update_decision(three, status=Status.MAYBE, starred=True)
    alice.update_decision(four, status=Status.REJECTED)
    from assistant.lab import build, render

    lab = build(Store.open(settings.model_copy(update={"user": "alice"})), date.today() - timedelta(days=7))
    assert [p.item.paper.id for p in lab.accepted][0] == two  # two people accepted it
    assert {p.item.paper.id for p in lab.accepted} == {one, two, three}
    assert [p.item.paper.id for p in lab.disputed] == [one]
    assert {p.item.paper.id for p in lab.for_me} == {two, three}
    by_id = {p.item.paper.id: p for p in lab.papers}
    assert by_id[one].accepted_by == ["alice"] and by_id[one].rejected_by == ["bob"]
    assert by_id[two].undecided(lab.people) == ["alice"]
    assert by_id[four].accepted_by == []
    text = render(lab)
    assert (
        text.index("Paper number 2") < text.index("Paper number 1") < text.index("## Where people disagree")
    )
    assert text.count("Paper number 1") == 2 and "Paper number 4" not in text
    # Nothing decided lately: nothing to show.
    assert build(alice, date.today() + timedelta(days=1)).accepted == []


def test_ranked_lab_prints_each_persons_decision(demo_store: Path) -> None:
    a, b = "title:492e614b5a352bb3", "title:91f1d89becdbad99"
    triage(ME, "mark", a, "--accept")
    triage("bob", "mark", a, "--reject")
    triage("bob", "mark", b, "--accept", "--star")
    lines = [json.loads(line) for line in triage(ME, "ranked", "--lab", "--json").splitlines()]
    assert [(r["id"], r["accepted_by"], r["rejected_by"], r["disputed"]) for r in lines] == [
        (b, ["bob"], [], False),
        (a, [ME], ["bob"], True),
    ]
    assert lines[0]["decisions"]["bob"]["starred"] is True
    table = said(triage(ME, "ranked", "--lab"))
    assert f"{ME} (you)" in table and "1 disputed, 1 you have not decided" in table
    assert "disputed" in table and "for you" in table


def test_what_one_person_adds_is_new_for_everyone_in_filters_too(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    bob.upsert_papers([paper(2, "Routing in experts")])  # a fetch or an import of his
    for who in (alice, bob, Store.open(settings.model_copy(update={"user": "carol"}))):
        assert sorted(who.iter_ids({"status": "new"})) == ["arxiv:2501.00001", "arxiv:2501.00002"]
        assert who.counts_by_status()[Status.NEW] == 2


def test_a_second_agenda_keeps_its_assessments_when_the_first_moves_to_it(tmp_path: Path) -> None:
    from assistant.agenda import parse_agenda
    from assistant.triage.batch import tag_offline

    Path("a.md").write_text("# A\n\n## Adapters\n\nAdapters and LoRA.\n", encoding="utf-8")
    Path("b.md").write_text(AGENDA_B, encoding="utf-8")
    base = load_settings(store=tmp_path / "store")
    alice = Store.open(base.model_copy(update={"user": "alice", "agenda": Path("a.md")}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in mixture of experts")])
    tag_offline(alice, parse_agenda(Path("a.md").read_text(encoding="utf-8")))
    alice.upsert_papers([paper(3, "Adapters for everyone, a second record")])  # not assessed for A
    bob = Store.open(base.model_copy(update={"user": "bob", "agenda": Path("b.md")}))
    assert bob.view.slot is not None and list(bob.iter_ids({"relevance": {"$gte": 0.0}})) == []
    tag_offline(bob, parse_agenda(AGENDA_B))
    theirs = {i.paper.id: i.assessment for i in bob.iter_all()}
    assert len(list(bob.iter_ids({"relevance": {"$gte": 0.0}}))) == 3
    # Alice takes up Bob's agenda: she reads his assessments, and he still does.
    alice = Store.open(base.model_copy(update={"user": "alice", "agenda": Path("b.md")}))
    bob = Store.open(base.model_copy(update={"user": "bob", "agenda": Path("b.md")}))
    for who in (alice, bob):
        assert {i.paper.id: i.assessment for i in who.iter_all()} == theirs
    # Bob merging a duplicate: the dropped record's assessment for the plain agenda (A) moves to
    # the kept paper, which had none, for those who read with A.
    bob.absorb("arxiv:2501.00003", "arxiv:2501.00001", "the same work")
    carol = Store.open(base.model_copy(update={"user": "carol", "agenda": Path("a.md")}))
    kept = carol.get("arxiv:2501.00003")
    a_hash = parse_agenda(Path("a.md").read_text(encoding="utf-8")).hash
    assert kept is not None and kept.assessment is not None and kept.assessment.agenda_hash == a_hash


def test_tagging_for_another_agenda_is_news_only_to_that_agendas_readers(
    settings: Settings, tmp_path: Path
) -> None:
    """Bob's `tag` for his agenda writes every paper: Alice's refreshes (her review UI every 3 s,
    her `daily`) read none of them again; Bob's do, and decisions are news to everyone."""
    import time

    from assistant.agenda import parse_agenda
    from assistant.triage.batch import tag_offline

    a_md, b_md = tmp_path / "a.md", tmp_path / "b.md"
    a_md.write_text("# A\n\n## Adapters\n\nAdapters and LoRA.\n", encoding="utf-8")
    b_md.write_text(AGENDA_B, encoding="utf-8")
    alice = Store.open(settings.model_copy(update={"user": "alice", "agenda": a_md}))
    papers = [paper(1, "Adapters for everyone"), paper(2, "Routing in experts"), paper(3, "Serving")]
    alice.upsert_papers(papers)
    tag_offline(alice, parse_agenda(a_md.read_text(encoding="utf-8")))
    ids = {p.id for p in papers}
    before = time.time()
    time.sleep(0.05)
    bob = Store.open(settings.model_copy(update={"user": "bob", "agenda": b_md}))
    tag_offline(bob, parse_agenda(AGENDA_B))
    assert bob.view.slot is not None
    # Read again by both, each process new (a queue of writes applied on opening stamps the same).
    alice = Store.open(settings.model_copy(update={"user": "alice", "agenda": a_md}))
    bob = Store.open(settings.model_copy(update={"user": "bob", "agenda": b_md}))
    assert alice.changed_since(before) == []
    assert list(alice.iter_ids({"touched": {"$gt": before}})) == []
    theirs = dict(bob.changed_since(before))
    assert set(theirs) == ids
    assert all(meta["touched"] > before for meta in theirs.values())
    assert set(bob.iter_ids({"$and": [{"touched": {"$gt": before}}, {"relevance": {"$gte": 0.0}}]})) == ids
    assert bob.view.where({"touched": {"$lt": before}}) == {"touched": {"$lt": before}}  # the plain one
    # Alice's stamps are as they were; no one's plain `touched` moved.
    stored = dict(alice.iter_metadata(stored=True))
    assert all(meta["touched"] < before for meta in stored.values())
    # A decision is everyone's news, whatever their agenda.
    decided = time.time()
    time.sleep(0.05)
    alice.set_status(["arxiv:2501.00001"], Status.ACCEPTED)
    for who in (alice, bob):
        assert [pid for pid, _ in who.changed_since(decided)] == ["arxiv:2501.00001"]


def test_the_lab_view_leaves_out_what_an_import_accepted(settings: Settings) -> None:
    from assistant.lab import build

    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in experts")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    bob.set_status(["arxiv:2501.00001"], Status.ACCEPTED, seed=True)  # ingest --accept
    bob.update_decision("arxiv:2501.00002", status=Status.ACCEPTED)
    lab = build(alice, date.today() - timedelta(days=7))
    assert [p.item.paper.id for p in lab.for_me] == ["arxiv:2501.00002"]


def test_rm_says_when_it_deletes_other_peoples_decisions(demo_store: Path) -> None:
    pid = "title:492e614b5a352bb3"
    triage("bob", "mark", pid, "--accept")
    out = said(triage(ME, "rm", pid, "--yes"))
    assert "1 paper of these carry other people's decisions (bob)" in out


def test_a_jsonl_export_restores_everyones_decisions_each_to_its_person(
    demo_store: Path, tmp_path: Path
) -> None:
    ids = [pid for pid, _ in Store.open(load_settings()).iter_metadata()][:6]
    triage(ME, "mark", ids[0], "--accept")
    triage(ME, "note", ids[1], "mine")
    triage("bob", "mark", ids[0], "--reject")
    triage("bob", "mark", ids[2], "--maybe", "--star")
    triage("bob", "note", ids[3], "bob's note")
    triage("bob", "list", "create", "for the group", "--description", "what bob reads out")
    triage("bob", "list", "add", "for the group", ids[4])
    triage(ME, "list", "create", "rg", "--shared", "--description", "the reading group")
    triage("bob", "list", "add", "rg", ids[5])
    triage(ME, "list", "add", "rg", ids[0])
    backup = tmp_path / "lab.jsonl"
    triage(ME, "export", "-f", "jsonl", "-o", str(backup))
    lines = {json.loads(line)["paper"]["id"]: json.loads(line) for line in backup.read_text().splitlines()}
    assert lines[ids[0]]["person"] == ME and set(lines[ids[0]]["people"]) == {"bob"}
    assert "people" not in lines[ids[5]]  # nobody else holds anything of their own on it
    assert lines[ids[5]]["shared_lists"]["rg"]["added_by"] == "bob" and "rg" not in lines[ids[0]]["lists"]

    # Restored into a fresh store by someone else: each decision is its person's again.
    fresh = ["--store", str(tmp_path / "restored")]
    triage("carol", *fresh, "ingest", str(backup))
    mine, bobs, carols = (rows_in(who, *fresh) for who in (ME, "bob", "carol"))
    assert (mine[ids[0]]["status"], mine[ids[1]]["note"], mine[ids[2]]["status"]) == (
        "accepted",
        "mine",
        "new",
    )
    assert (bobs[ids[0]]["status"], bobs[ids[2]]["status"], bobs[ids[2]]["starred"]) == (
        "rejected",
        "maybe",
        "yes",
    )
    assert bobs[ids[3]]["note"] == "bob's note" and bobs[ids[1]]["note"] == ""
    assert {row["status"] for row in carols.values()} == {"new"} and not any(
        r["note"] for r in carols.values()
    )
    assert "what bob reads out" in triage("bob", *fresh, "list", "ls")
    assert ids[4] in triage("bob", *fresh, "list", "show", "for the group")
    assert "for the group" not in triage(ME, *fresh, "list", "ls")
    people = Store.open(load_settings(store=tmp_path / "restored")).people()
    assert people[0] == "carol" and set(people[1]) == {"carol", ME, "bob"}
    # The lab's shared list comes back shared, made by its maker, with who added each paper.
    group = ReadingLists(Store.open(load_settings(store=tmp_path / "restored", user="carol")))
    assert group.get("rg").shared and group.get("rg").created_by == ME
    assert group.get("rg").description == "the reading group"
    assert group.added_by("rg") == {ids[5]: "bob", ids[0]: ME}
    # Restoring it again changes nothing.
    triage("carol", *fresh, "ingest", str(backup))
    assert rows_in("bob", *fresh) == bobs and rows_in(ME, *fresh) == mine


def test_a_single_persons_jsonl_export_restores_to_whoever_restores_it(
    demo_store: Path, tmp_path: Path
) -> None:
    pid = next(pid for pid, _ in Store.open(load_settings()).iter_metadata())
    triage(ME, "mark", pid, "--accept")
    backup = tmp_path / "mine.jsonl"
    triage(ME, "export", "-f", "jsonl", "-o", str(backup))
    assert not any("person" in json.loads(line) for line in backup.read_text().splitlines())
    fresh = ["--store", str(tmp_path / "restored")]
    triage("dora", *fresh, "ingest", str(backup))  # (the same researcher, another login)
    assert rows_in("dora", *fresh)[pid]["status"] == "accepted"


def rows_in(user: str, *where: str) -> dict[str, dict[str, str]]:
    """`export -f csv` as this person, of the store the global options `where` name: {id: row}."""
    result = runner.invoke(app, ["--user", user, *where, "export", "-f", "csv"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return {row["id"]: row for row in csv.DictReader(io.StringIO(result.stdout))}


def test_a_renamed_shared_list_keeps_who_added_each_paper(settings: Settings) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in experts")])
    bob = Store.open(settings.model_copy(update={"user": "bob"}))
    one, two = "arxiv:2501.00001", "arxiv:2501.00002"
    ReadingLists(alice).create("rg", shared=True)
    ReadingLists(bob).add("rg", [one])
    ReadingLists(alice).add("rg", [two])
    carol = Store.open(settings.model_copy(update={"user": "carol"}))
    ReadingLists(carol).rename("rg", "reading group")
    assert ReadingLists(alice).added_by("reading group") == {one: "bob", two: "alice"}
    assert [rl.name for rl in ReadingLists(bob).all()] == ["reading group"]
    assert sorted(ReadingLists(bob).members("reading group")) == [one, two]


def test_a_shared_list_deleted_by_someone_else_is_no_longer_shared_in_a_running_process(
    settings: Settings,
) -> None:
    alice = Store.open(settings.model_copy(update={"user": "alice"}))
    alice.upsert_papers([paper(1, "Adapters for everyone"), paper(2, "Routing in experts")])
    one = "arxiv:2501.00001"
    bob = Store.open(settings.model_copy(update={"user": "bob"}))  # a process that stays open
    ReadingLists(alice).create("rg", shared=True)
    ReadingLists(bob).add("rg", [one])
    ReadingLists(Store.open(settings.model_copy(update={"user": "alice"}))).delete("rg")
    # Bob, still running, makes a list of his own by that name: it is his, not the lab's.
    lists = ReadingLists(bob)
    lists.create("rg")
    lists.add("rg", [one])
    assert lists.members("rg") == [one] and not lists.get("rg").shared
    stored = alice.get_stored(ids=[one], include=["metadatas"])["metadatas"][0]
    assert stored.get("d:bob:list:rg") is True and not stored.get("lab:list:rg")
    assert "rg" not in {rl.name for rl in ReadingLists(alice).all()}


def test_a_restored_record_naming_someone_no_user_name_can_be_is_a_located_error(
    demo_store: Path, tmp_path: Path
) -> None:
    pid = next(pid for pid, _ in Store.open(load_settings()).iter_metadata())
    triage(ME, "mark", pid, "--accept")
    triage("bob", "mark", pid, "--reject")
    backup = tmp_path / "lab.jsonl"
    triage(ME, "export", "-f", "jsonl", "-o", str(backup))
    good = backup.read_text().splitlines()[0]
    hostile = json.loads(good)
    hostile["paper"]["id"], hostile["paper"]["title"] = "arxiv:2501.09999", "Another paper"
    hostile["people"] = {"ana:status": hostile["people"]["bob"]}  # would read back as ana's keys
    backup.write_text(good + "\n" + json.dumps(hostile) + "\n")
    fresh = ["--store", str(tmp_path / "restored")]
    said = runner.invoke(app, ["--user", "carol", *fresh, "ingest", str(backup)], env={"COLUMNS": "200"})
    text = " ".join(said.output.split())
    assert f"{backup.name}:2: 'people' holds 'ana:status', which cannot name a person" in text
    assert rows_in("bob", *fresh)[pid]["status"] == "rejected"  # the good record restored
    stored = Store.open(load_settings(store=tmp_path / "restored")).people()
    assert "ana:status" not in stored[1]
