"""`triage export -f jsonl --vectors`: the export carries each paper's vector, and restoring
it into a store with the same embedder embeds nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from assistant.embedding import MiniLMEmbedder
from assistant.export.common import ExportContext
from assistant.export.jsonl import Vectors, write
from assistant.ingest import ingest_files
from assistant.ingest.restore import parse_full_record
from assistant.store import Store
from tests.conftest import SAMPLE

QUERIES = ("retrieval augmented generation", "protein structure", "text embeddings from language models")


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    """The bundled sample in a store, and its export with vectors."""
    folder = tmp_path_factory.mktemp("original")
    store = Store.open(load_settings(store=folder / "store"))
    [report] = ingest_files(store, [SAMPLE])
    assert report.ok and report.new == 87
    items = list(store.iter_all())
    path = folder / "export.jsonl"
    vectors = Vectors(store.embedder_identity(), store.vectors([i.paper.id for i in items]))
    path.write_text(write(items, ExportContext(), vectors), encoding="utf-8")
    return store, path


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts the embedder is asked for, from now on."""
    asked: list[str] = []
    real: Callable[..., Any] = MiniLMEmbedder.__call__

    def counting(self: MiniLMEmbedder, input: list[str]) -> Any:
        asked.extend(input)
        return real(self, input)

    monkeypatch.setattr(MiniLMEmbedder, "__call__", counting)
    yield asked


def fresh(tmp_path: Path) -> Store:
    return Store.open(load_settings(store=tmp_path / "fresh"))


def rewrite(source: Path, target: Path, change: Callable[[int, dict[str, Any]], None]) -> Path:
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    for number, record in enumerate(records, start=1):
        change(number, record)
    target.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return target


def test_a_restore_with_vectors_embeds_nothing_and_finds_the_same(
    original: tuple[Store, Path], tmp_path: Path, embedded: list[str]
) -> None:
    source, path = original
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 87 and all('"embedding"' in line for line in lines)
    first = json.loads(lines[0])["embedding"]
    assert first["embedder"] == "paper-triage-minilm-int8 max_tokens=256" and first["dims"] == 384
    assert len(base64.b64decode(first["float32"])) == 384 * 4

    store = fresh(tmp_path)
    [report] = ingest_files(store, [path])
    assert report.ok and report.new == 87 and not report.skipped and not report.notes
    assert embedded == []  # not one text embedded
    ids = [i.paper.id for i in source.iter_all()]
    theirs, mine = source.embeddings(ids), store.embeddings(ids)
    exported = {
        json.loads(line)["paper"]["id"]: np.frombuffer(
            base64.b64decode(json.loads(line)["embedding"]["float32"]), dtype="<f4"
        )
        for line in lines
    }
    for pid in ids:  # the file holds the stored vectors bit for bit
        assert np.array_equal(exported[pid], np.asarray(theirs[pid], dtype=np.float32))
    # Chroma normalises a vector it is given for a cosine collection: an already unit vector may
    # move in its last bit (float32), no more.
    assert max(float(np.abs(np.subtract(mine[p], theirs[p])).max()) for p in ids) < 1e-6
    for query in QUERIES:
        expected = [(h.item.paper.id, round(h.distance, 6)) for h in source.search(query, k=10)]
        assert [(h.item.paper.id, round(h.distance, 6)) for h in store.search(query, k=10)] == expected


def test_the_cli_flag_and_an_export_without_it(original: tuple[Store, Path], tmp_path: Path) -> None:
    source, _ = original
    runner = CliRunner()
    base = ["--store", str(source.path), "export", "-f", "jsonl"]
    plain = runner.invoke(app, [*base, "-o", str(tmp_path / "plain.jsonl")])
    assert plain.exit_code == 0, plain.output
    plain_lines = (tmp_path / "plain.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(plain_lines) == 87 and not any("embedding" in json.loads(line) for line in plain_lines)
    direct = write(list(source.iter_all())[:3], ExportContext()).splitlines()
    assert not any("embedding" in json.loads(line) for line in direct)
    with_vectors = runner.invoke(app, [*base, "--vectors", "-o", str(tmp_path / "v.jsonl")])
    assert with_vectors.exit_code == 0, with_vectors.output
    lines = (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 87 and all(json.loads(line)["embedding"]["dims"] == 384 for line in lines)
    wrong = runner.invoke(app, ["--store", str(source.path), "export", "-f", "csv", "--vectors"])
    assert wrong.exit_code != 0 and "--vectors is for -f jsonl" in wrong.output


def test_the_vector_is_one_more_key_the_rest_reads_as_before(original: tuple[Store, Path]) -> None:
    """An older restore reads only the keys it knows: the record without `embedding` is the same record."""
    _, path = original
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    without = {k: v for k, v in record.items() if k != "embedding"}
    paper, restored = parse_full_record(record)
    assert restored.vector is not None and len(restored.vector.values) == 384
    assert (paper, restored.decision, restored.assessment) == (
        parse_full_record(without)[0],
        parse_full_record(without)[1].decision,
        parse_full_record(without)[1].assessment,
    )


def test_vectors_of_another_embedder_are_ignored_with_a_note(
    original: tuple[Store, Path], tmp_path: Path, embedded: list[str]
) -> None:
    source, path = original

    def other(number: int, record: dict[str, Any]) -> None:
        if number <= 10:
            record["embedding"]["embedder"] = "openai model_name=text-embedding-3-small"

    changed = rewrite(path, tmp_path / "other.jsonl", other)
    store = fresh(tmp_path)
    [report] = ingest_files(store, [changed])
    assert report.ok and report.new == 87 and not report.skipped
    assert len(embedded) == 10  # those ten only; the other 77 vectors were taken
    [note] = report.notes
    assert "10 papers came with vectors made by 'openai model_name=text-embedding-3-small'" in note
    assert "embedded" in note


def test_malformed_vectors_are_located_notes_and_those_papers_are_embedded(
    original: tuple[Store, Path], tmp_path: Path, embedded: list[str]
) -> None:
    source, path = original

    def spoil(number: int, record: dict[str, Any]) -> None:
        vector = record["embedding"]
        if number == 1:  # too short for its dims
            vector["float32"] = base64.b64encode(base64.b64decode(vector["float32"])[:40]).decode()
        elif number == 2:
            vector["float32"] = ["a", "b"]
        elif number == 3:
            vector["float32"] = "not base64 at all!"
        elif number == 4:  # well formed, but 10 numbers where the store's vectors have 384
            vector.update(float32=[0.1] * 10, dims=10)
        elif number == 5:  # the abstract was edited after the export
            record["paper"]["abstract"] += " Edited."

    changed = rewrite(path, tmp_path / "bad.jsonl", spoil)
    store = fresh(tmp_path)
    [report] = ingest_files(store, [changed])
    assert report.ok and report.new == 87 and not report.skipped
    assert len(embedded) == 5
    notes = "\n".join(report.notes)
    assert f"{changed}:1: 'embedding': it has 10 numbers, but 'dims' says 384" in notes
    assert f"{changed}:2: 'embedding': 'float32' must be base64 or a list of numbers" in notes
    assert f"{changed}:3: 'embedding': 'float32' is not base64" in notes
    assert "1 paper came with vectors of 10 numbers, this store's have 384" in notes
    assert "1 paper came with vectors of another text than the paper's" in notes
    ids = [i.paper.id for i in source.iter_all()]
    mine, theirs = store.embeddings(ids), source.embeddings(ids)
    edited = json.loads(changed.read_text(encoding="utf-8").splitlines()[4])["paper"]["id"]
    assert max(float(np.abs(np.subtract(mine[p], theirs[p])).max()) for p in ids if p != edited) < 1e-6
