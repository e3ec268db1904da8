"""The reads of the daily loop that the mirror answers without reading every paper: filters
through its index, search through a matrix file, counts kept per paper, BibTeX entries kept
between exports, a repeated query's vector. Each answers exactly what reading every paper (or
Chroma) answers: the same papers, in the same order, to the same bit and the same text."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path
from typing import Any

import chromadb
import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from assistant.export import bib, bibcache, by_relevance, latex
from assistant.ingest import parse_file
from assistant.lists import ReadingLists
from assistant.models import Decision, Paper, Status
from assistant.selection import Selection
from assistant.store import Store, derived
from assistant.store import vectors as vector_file
from assistant.store.mirror import PAPERS, VERSION, Mirror, matcher, mirror_path
from conftest import SHARED, _isolate, sample_records

CHROMA_SETTINGS = chromadb.config.Settings(anonymized_telemetry=False)
runner = CliRunner()


def _store(tmp_path: Path, n: int = 12) -> tuple[Store, list[str]]:
    store = Store.open(load_settings(store=tmp_path / "store"))
    report = store.upsert_papers(
        [Paper.create(title=str(r["title"]), abstract=str(r["abstract"])) for r in sample_records(n)]
    )
    return store, report.new


def _reopened(tmp_path: Path) -> Store:
    """The store as the next command opens it (the mirror current: no Chroma)."""
    return Store.open(load_settings(store=tmp_path / "store"))


# -- filters through the index --------------------------------------------------------------


def _metadata(rng: random.Random) -> dict[str, Any]:
    """Metadata of the shapes the index keeps and those it must leave to the record-by-record
    test: strings, booleans and numbers under the same keys, lists, absent keys."""
    meta: dict[str, Any] = {"k": rng.choice([0, 1, 2.5, 7])}
    for key, values in (
        ("status", ["new", "accepted", "rejected", "maybe", "True", True, 1, ["accepted", "x"]]),
        ("starred", [True, False, 1, 0, "True"]),
        ("seed", [True, "yes"]),
        ("list:a", [True, False, "True", 1]),
        ("list:b", [True]),
        ("tags", [["u", "v"], ["w"], ["accepted"]]),
    ):
        if rng.random() < 0.8:
            meta[key] = rng.choice(values)
    return meta


WHERES: list[dict[str, Any]] = [
    {"status": "accepted"},
    {"status": "True"},
    {"status": True},
    {"status": {"$eq": "new"}},
    {"status": {"$in": ["accepted", "rejected"]}},
    {"status": {"$in": [True, False]}},
    {"starred": True},
    {"starred": False},
    {"starred": 1},
    {"starred": "True"},
    {"seed": True},
    {"list:a": True},
    {"list:b": True},
    {"list:a": "True"},
    {"$and": [{"status": "new"}, {"list:a": True}]},
    {"$or": [{"status": "accepted"}, {"starred": True}]},
    {"$and": [{"status": {"$in": ["new", "maybe"]}}, {"k": {"$gte": 1}}]},
    {"$and": [{"list:a": True}, {"tags": {"$contains": "u"}}]},
    {"status": {"$ne": "new"}},
    {"$or": [{"status": "accepted"}, {"k": {"$lt": 1}}]},
    {"tags": {"$contains": "accepted"}},
]


def test_the_index_answers_filters_as_chroma_and_the_record_test_do(tmp_path: Path) -> None:
    """Every filter finds the same records through the index as Chroma and `matcher` find,
    before and after updates, removed keys and deletions."""
    rng = random.Random(7)
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=CHROMA_SETTINGS)
    collection = client.get_or_create_collection("probe", embedding_function=None)
    ids = [f"p{i}" for i in range(80)]
    metas = [_metadata(rng) for _ in ids]
    collection.add(ids=ids, embeddings=[[1.0, float(i)] for i in range(len(ids))], metadatas=metas)  # type: ignore[arg-type]
    mirror = Mirror(tmp_path / "mirror.sqlite3")
    mirror.rebuild(
        [(PAPERS, pid, f"doc {pid}", dict(m), None) for pid, m in zip(ids, metas, strict=True)], (0,) * 6
    )  # type: ignore[arg-type]

    def agree(when: str) -> None:
        everything = collection.get(include=["metadatas"])
        for where in WHERES:
            expected = collection.get(where=where, include=[])["ids"]
            found = mirror.get(PAPERS, where=where, include=[])
            assert found is not None and found["ids"] == expected, (when, where)
            tested = [
                pid
                for pid, meta in zip(everything["ids"], everything["metadatas"] or [], strict=True)
                if matcher(where)(dict(meta or {}))
            ]
            assert tested == expected, (when, where)
            page = mirror.get(PAPERS, where=where, limit=3, offset=2, include=["metadatas"])
            assert page is not None and page["ids"] == expected[2:5], (when, where)

    agree("built")
    for round_ in range(3):
        chosen = rng.sample(ids, 20)
        patches = [
            {key: (None if rng.random() < 0.3 else value) for key, value in _metadata(rng).items()}
            for _ in chosen
        ]
        collection.update(ids=chosen, metadatas=patches)  # type: ignore[arg-type]
        mirror.apply(PAPERS, "update", chosen, patches)
        gone = rng.sample([i for i in ids if i not in chosen], 3)
        collection.delete(ids=gone)
        mirror.apply(PAPERS, "delete", gone)
        ids = [i for i in ids if i not in gone]
        agree(f"round {round_}")


# -- search through the matrix file ------------------------------------------------------------


def test_search_reads_a_matrix_file_and_finds_the_same_papers_at_the_same_distances(tmp_path: Path) -> None:
    """The mapped matrix gives what the vectors' table gives, bit for bit (with and without a
    filter): as written, after a decision (the files serve as they are), after new papers (their
    rows appended), after a deletion and a changed text (the files written anew)."""
    store, ids = _store(tmp_path, 12)
    store.set_status(ids[:5], Status.ACCEPTED)
    del store
    reader = _reopened(tmp_path)
    mirror = reader.mirror
    assert mirror is not None and not reader.connected
    query = reader.query_vector("multilingual language models")

    def same(where: dict[str, Any] | None, k: int) -> list[tuple[str, float]]:
        wanted = mirror._matching(PAPERS, where) if where is not None else None
        found = mirror.nearest(PAPERS, query, k, where)
        assert found == mirror._nearest_rows(PAPERS, query, k, wanted)
        return found or []

    def agree() -> None:
        for where in (None, {"status": "accepted"}, {"status": {"$ne": "accepted"}}):
            for k in (1, 5, 40):
                same(where, k)

    def kept() -> list[str]:
        return sorted(
            p.name[len(mirror.path.name) :] for p in mirror.path.parent.glob(f"{mirror.path.name}.*")
        )

    agree()
    tokens = mirror.vectors_tokens()
    assert tokens is not None and len(kept()) == 5 and all(f.startswith(f".{tokens[0]}.") for f in kept())
    # A decision (queued, no Chroma) leaves the vectors as they are: the same files serve.
    _reopened(tmp_path).set_status([ids[6]], Status.REJECTED)
    assert mirror.vectors_tokens() == tokens
    assert same({"status": "rejected"}, 3)[0][0] == ids[6]
    # New papers: their rows are appended to the same base's files, and they are found.
    writer = _reopened(tmp_path)
    new = writer.upsert_papers(
        [
            Paper.create(title="Multilingual language models", abstract="For many languages."),
            Paper.create(title="Sparse attention", abstract="Long documents."),
        ]
    )
    after = mirror.vectors_tokens()
    assert after is not None and after[0] == tokens[0] and after[1] != tokens[1]
    assert same(None, 1)[0][0] == new.new[0]
    agree()
    assert (vector_file.header(mirror.path, after[0]) or {}).get("count") == 14
    # Files that cannot be appended to (one removed) are written anew.
    next(mirror.path.parent.glob(f"{mirror.path.name}.*.rows.i64")).unlink()
    writer.upsert_papers([Paper.create(title="Retrieval augmented generation", abstract="Search.")])
    agree()
    assert (vector_file.header(mirror.path, after[0]) or {}).get("count") == 15
    # A deletion: a new base, its files written anew, the old ones gone.
    writer.delete_papers([new.new[0]])
    assert new.new[0] not in [pid for pid, _ in same(None, 20)]
    agree()
    base = (mirror.vectors_tokens() or ("",))[0]
    assert base != tokens[0] and len(kept()) == 5 and all(f.startswith(f".{base}.") for f in kept())
    # A changed text (a new vector for a paper kept): a new base too.
    text = "Multilingual language models\n\nFor many languages."
    writer.collection.update(ids=[ids[2]], documents=[text], embeddings=writer.embed([text]))
    assert (mirror.vectors_tokens() or ("",))[0] != base
    assert same(None, 1)[0][0] == ids[2]
    agree()
    # Chroma itself ranks the same papers.
    chroma = _reopened(tmp_path)
    chroma._connect()
    chroma.mirror = None
    hits = chroma.search("multilingual language models", k=5)
    assert [h.item.paper.id for h in reader.search("multilingual language models", k=5)] == [
        h.item.paper.id for h in hits
    ]


def test_a_repeated_query_takes_the_vector_it_had_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant import minilm
    from assistant.store import queries

    _store(tmp_path, 3)
    store = _reopened(tmp_path)  # no embedder made: a search embeds its query with the bundled model
    made = minilm.embed(["sparse attention"])[0]
    first = store.query_vector("sparse attention")
    calls: list[str] = []
    monkeypatch.setattr(minilm, "embed", lambda texts, **_: calls.append(texts[0]) or made[None, :])
    again = store.query_vector("sparse attention")
    assert calls == [] and again.tobytes() == first.tobytes() == made.tobytes()
    # Another model (a reinstall, another version) makes it anew.
    monkeypatch.setattr(queries, "model_identity", lambda *a: ("another",))
    store.query_vector("sparse attention")
    assert calls == ["sparse attention"]


# -- values kept per paper ---------------------------------------------------------------------


def _part(pid: str, document: str, meta: dict[str, Any]) -> tuple[str, str, int, bool]:
    return pid, str(meta.get("status") or "new"), len(document), bool(meta.get("list:later"))


def _every(store: Store) -> list[tuple[str, str, int, bool]]:
    return [_part(pid, doc, meta) for pid, doc, meta in store.iter_records()]


def test_values_kept_per_paper_follow_every_kind_of_write(tmp_path: Path) -> None:
    """Queued decisions of other processes, direct writes, new papers, deletions and a rebuilt
    mirror: the kept values are always those of reading every paper, in the store's order, and
    only papers written since are read again."""
    store, ids = _store(tmp_path, 10)
    computed: list[str] = []

    def counted(pid: str, document: str, meta: dict[str, Any]) -> tuple[str, str, int, bool]:
        computed.append(pid)
        return _part(pid, document, meta)

    def check(reader: Store, read_again: int | None) -> None:
        computed.clear()
        assert derived.per_paper(reader, "probe", "k", counted) == _every(reader)
        if read_again is not None:
            assert len(computed) == read_again

    check(_reopened(tmp_path), 10)
    check(_reopened(tmp_path), 0)
    queued = _reopened(tmp_path)
    queued.set_status([ids[3]], Status.MAYBE)
    queued.set_memberships({ids[4]: {"later": True}})
    assert not queued.connected
    check(_reopened(tmp_path), 2)
    store.set_decisions({ids[0]: Decision(status=Status.ACCEPTED, note="n")})  # Chroma open: drains too
    check(_reopened(tmp_path), None)
    store.upsert_papers([Paper.create(title="One more paper", abstract="Its text.")])
    check(_reopened(tmp_path), 1)
    store.delete_papers([ids[5]])
    check(_reopened(tmp_path), 10)  # a deletion: every paper again
    computed.clear()
    assert derived.per_paper(_reopened(tmp_path), "probe", "other key", counted) == _every(store)
    assert len(computed) == 10
    # A write Chroma got from another program: the mirror is rebuilt, everything read again.
    client = chromadb.PersistentClient(path=str(tmp_path / "store"), settings=CHROMA_SETTINGS)
    client.get_collection("papers").update(ids=[ids[1]], metadatas=[{"status": "rejected"}])
    reader = _reopened(tmp_path)
    check(reader, 10)
    assert any(v[0] == ids[1] and v[1] == "rejected" for v in _every(reader))


def _stats(store_dir: Path) -> str:
    result = runner.invoke(app, ["--store", str(store_dir), "stats"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    return result.output


def test_stats_after_a_decision_counts_what_reading_every_paper_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = _store(tmp_path, 8)
    (tmp_path / "agenda.md").write_text("## Language models\nMultilingual models.\n", encoding="utf-8")
    from assistant.agenda import load_agenda
    from assistant.triage.batch import tag_offline

    tag_offline(store, load_agenda(tmp_path / "agenda.md"))
    store_dir = tmp_path / "store"
    _stats(store_dir)  # keeps every paper's part
    for n, change in enumerate(
        [
            lambda s: s.set_status([ids[0]], Status.ACCEPTED),
            lambda s: s.update_decision(ids[1], starred=True),
            lambda s: s.set_failures({ids[2]: ("k", "timed out")}),
            lambda s: s.upsert_papers([Paper.create(title="Unassessed paper", abstract="Text.")]),
        ]
    ):
        change(_reopened(tmp_path))
        kept = _stats(store_dir)
        with monkeypatch.context() as patched:
            patched.setattr(derived, "per_paper", lambda *a, **k: None)  # every paper read
            assert kept == _stats(store_dir), n
    # An edited agenda makes every assessment stale: every paper is counted again.
    (tmp_path / "agenda.md").write_text("## Retrieval\nSearch engines.\n", encoding="utf-8")
    kept = _stats(store_dir)
    assert re.search(r"stale \('triage tag' redoes\)\D+8\b", kept), kept
    monkeypatch.setattr(derived, "per_paper", lambda *a, **k: None)
    assert kept == _stats(store_dir)


# -- BibTeX entries kept between exports ---------------------------------------------------------

BIB_FILES = (
    "corpus/bib_biblatex_examples.bib",
    "corpus/bib_ads_spiralmap.bib",
    "realworld/bibtex_bbt_export_901.bib",
)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of real .bib files' papers (names with particles, accents, math, crossrefs,
    merged duplicates) and sample papers, with decisions, notes, tags, stars and lists."""
    missing = [f for f in BIB_FILES if not (SHARED / f).is_file()]
    if missing:
        pytest.skip(f"needs {missing}: the shared fixtures beside the project")
    where = tmp_path_factory.mktemp("library")
    with pytest.MonkeyPatch.context() as patch:
        _isolate(where, patch)  # its caches in a home of its own, as every test's
        store = Store.open(load_settings(store=where / "store"))
        papers = [p for name in BIB_FILES for p in parse_file(SHARED / name)[1].papers]
        papers += [
            Paper.create(title=str(r["title"]), abstract=str(r["abstract"]), year=2020)
            for r in sample_records(30)
        ]
        store.upsert_papers(papers)
        ids = list(store.iter_ids())
        rng = random.Random(3)
        store.set_status(rng.sample(ids, 40), Status.ACCEPTED)
        store.set_status(rng.sample(ids, 20), Status.REJECTED)
        for pid in rng.sample(ids, 10):
            store.update_decision(
                pid, note="read {this} & check $x^2$ – later", tags=["mine", "to read"], starred=True
            )
        ReadingLists(store).create("later")
        store.set_memberships({pid: {"later": True} for pid in rng.sample(ids, 25)})
    return where / "store"


def _full(store: Store, selection: Selection, limit: int | None, score: Any, dialect: str) -> tuple[int, str]:
    """The export as written from every selected stored paper (`triage export`'s own path)."""
    wrapped = (
        (lambda i: score(i.paper.id, i.assessment.relevance if i.assessment else None)) if score else None
    )
    items = by_relevance([i for i in store.iter_all(selection.where()) if selection.matches(i)], wrapped)
    items = items[:limit] if limit else items
    return len(items), bib.render(items, dialect)


SELECTIONS = [
    Selection(),
    Selection(statuses=(Status.ACCEPTED,)),
    Selection(statuses=(Status.ACCEPTED, Status.NEW)),
    Selection(list_name="later"),
    Selection(starred=True),
    Selection(tags=("mine",)),
    Selection(statuses=(Status.REJECTED,), since=__import__("datetime").date(2000, 1, 1)),
]


def test_a_bibtex_export_from_kept_entries_is_the_text_written_in_full(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every selection, both dialects, with and without the personal model's order and a limit:
    the same text as writing every paper; after one decision, only that paper is written again."""
    store = Store.open(load_settings(store=library))
    assert store.mirror_current()

    def blended(pid: str, relevance: float | None) -> float:  # any order: a ranking's stand-in
        return (hash(pid) % 97) / 10 + (relevance or 0.0)

    made: list[str] = []
    keep = bibcache._keep
    monkeypatch.setattr(
        bibcache, "_keep", lambda item, dialect: made.append(item.paper.id) or keep(item, dialect)
    )
    for dialect in ("bib", "biblatex"):
        for selection in SELECTIONS:
            for score, limit in ((None, None), (blended, None), (None, 7)):
                fast = bibcache.export(store, selection, limit, score, dialect)
                assert fast is not None
                assert fast == _full(store, selection, limit, score, dialect), (dialect, selection, limit)
    assert "ids = {" in _full(store, Selection(), None, None, "bib")[1]  # merged records' keys are written
    assert len(made) == 2 * store.count()  # each paper once per dialect
    pid = next(iter(store.iter_ids({"status": "accepted"})))
    _reopened(library.parent).update_decision(pid, note="changed")
    made.clear()
    reader = Store.open(load_settings(store=library))
    fast = bibcache.export(reader, Selection(statuses=(Status.ACCEPTED,)), None, None, "bib")
    assert made == [pid] and fast is not None
    assert fast == _full(reader, Selection(statuses=(Status.ACCEPTED,)), None, None, "bib")
    assert "changed" in fast[1]


def test_entries_that_cannot_be_kept_are_written_whole_and_a_damaged_file_is_made_anew(
    library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(load_settings(store=library))
    selection = Selection(statuses=(Status.ACCEPTED,))
    expected = _full(store, selection, None, None, "biblatex")
    keep = bibcache._keep

    def unsplit(item: Any, dialect: str) -> bibcache.Kept:
        value = keep(item, dialect)
        return (*value[:5], None, None) if hash(item.paper.id) % 2 else value

    monkeypatch.setattr(bibcache, "_keep", unsplit)
    path = bibcache.cache_file("export", f"{store.mirror.path}#bib").with_suffix(".sqlite3")  # type: ignore[union-attr]
    path.unlink(missing_ok=True)
    assert bibcache.export(store, selection, None, None, "biblatex") == expected
    assert bibcache.export(store, selection, None, None, "biblatex") == expected
    path.write_bytes(b"not a database" * 1000)
    assert bibcache.export(store, selection, None, None, "biblatex") is None  # written in full this time
    assert bibcache.export(store, selection, None, None, "biblatex") == expected


def test_the_export_command_writes_the_same_file_either_way(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def export(*args: str) -> str:
        out = tmp_path / "out.bib"
        result = runner.invoke(app, ["--store", str(library), "export", "-o", str(out), *args])
        assert result.exit_code == 0, result.output
        return out.read_text(encoding="utf-8")

    for args in (
        ["--status", "accepted"],
        ["--list", "later", "-f", "biblatex"],
        ["--starred", "-n", "3"],
        ["--tag", "nothing-has-it"],
    ):
        kept = export("-f", "bib", *args) if "-f" not in args else export(*args)
        with monkeypatch.context() as patched:
            patched.setattr(bibcache, "export", lambda *a, **k: None)
            assert kept == (export("-f", "bib", *args) if "-f" not in args else export(*args)), args


# -- LaTeX, a character at a time ---------------------------------------------------------------


def test_latex_encoding_a_character_at_a_time_is_the_encoders_own() -> None:
    rng = random.Random(11)
    alphabet = [chr(c) for c in range(0x20, 0x3000) if unicodedata.category(chr(c)) != "Cs"]
    alphabet += ["\u0301", "\u0308", "\u212b", "\u2126", "e\u0301", "\ufb01", "\U0001d6fc", "\t", "\n"]
    texts = alphabet + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    for utf8, encoder in ((False, latex._ASCII), (True, latex._UTF8)):
        chars = latex._Characters(encoder)
        for text in texts:
            assert chars.encode(text) == encoder.unicode_to_latex(text), (utf8, text)


# -- the layout ---------------------------------------------------------------------------------


def test_a_mirror_of_an_older_layout_is_removed_when_this_one_is_built(tmp_path: Path) -> None:
    store, _ = _store(tmp_path, 2)
    path = mirror_path(tmp_path / "store", "papers")
    old = path.with_name(path.name.replace(f".v{VERSION}.", f".v{VERSION - 1}."))
    old.write_bytes(b"an older layout")
    assert store.mirror is not None
    store._rebuild_mirror()
    assert not old.exists() and path.exists()
