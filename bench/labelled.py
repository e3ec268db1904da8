"""The labelled sets the ranking benchmarks run on, and the engine's scores for them.

All nine sets grade the same 514 papers (bench/data/ranking_papers.jsonl, the papers of the fixture
listing pages) 0/1/2 against research agendas, each agenda written as a paragraph and as three
words, by two readers who did not see each other's grades:

- set A (`tuning`): attention heads, multilingual adaptation, multi-task learning. The offline
  engine and the personal model were tuned on it.
- set B (`tuning`): parameter-efficient adaptation, efficient inference, factual knowledge,
  linguistic structure. Graded before any tuning for the offline engine's fourth version and
  the personal model and held out for them; the engine's sixth version was tuned on A and B.
- set C (`held out once`): mechanistic interpretability, vision-language models, alignment and
  safety, training data. Graded after the engine's sixth version was written; it reported that
  version and the personal model's confidence gate, once. Changes after that may be chosen on it.
- set D (`held out once`): reasoning and prompting, evaluation, text generation, architectures
  and scaling. Graded after set C's report; it reported the personal model once (stop 21).
- set E (`held out once`): retrieval and question answering, bias and fairness, robustness and
  generalisation, machine translation. Graded after set D's report; it reported the personal
  model once (stop 22).
- set F (`held out once`): sentiment and opinion, model compression, speech, long context
  and position. Graded after set E's report; it reported the engine, the personal model and a
  change to the model, rejected on it, once (stop 23).
- set G (`held out once`): hallucination and truthfulness, tokenization and vocabulary,
  specialised domains, in-context learning and instruction following. Graded after set F's
  report and before any figure was computed on it; it reported the engine and the personal
  model once (stop 25). Changes after that may be chosen on it.
- set H (`held out once`): dialogue and conversational agents, information extraction, text
  representations and semantic similarity, continual learning and model updating. Graded after
  set G's report and before any figure was computed on it; it reported the engine and the
  personal model once (stop 26).
- set I (`held out`): social media and its harms, security and privacy of language models,
  pretraining and scaling, question answering. Graded after set H's report and before any
  figure was computed on it (stop 27). Its subjects touch earlier ones (question answering in
  E's retrieval, attacks in E's robustness, scaling in D's architectures) with other agenda
  texts and other grades.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import ROOT

from assistant.agenda import Agenda, load_agenda
from assistant.config import load_settings
from assistant.models import Paper
from assistant.store import Store

DATA = ROOT / "bench" / "data"
SETS = {
    "A": ("tuning", ["heads", "multilingual", "multitask"], DATA / "labels"),
    "B": ("tuning", ["peft", "efficiency", "knowledge", "structure"], DATA / "labels_b"),
    "C": ("held out once", ["interp", "multimodal", "alignment", "data"], DATA / "labels_c"),
    "D": ("held out once", ["reasoning", "evaluation", "generation", "architectures"], DATA / "labels_d"),
    "E": ("held out once", ["retrieval", "fairness", "robustness", "translation"], DATA / "labels_e"),
    "F": ("held out once", ["sentiment", "compression", "speech", "longcontext"], DATA / "labels_f"),
    "G": ("held out once", ["hallucination", "tokenization", "domains", "incontext"], DATA / "labels_g"),
    "H": ("held out once", ["dialogue", "extraction", "embeddings", "continual"], DATA / "labels_h"),
    "I": ("held out", ["social", "security", "pretraining", "qa"], DATA / "labels_i"),
}
READERS = ("first", "second")
FORMS = ("para", "3 words")


@dataclass
class Case:
    """One agenda in one form, with both readers' grades (arrays in paper order)."""

    set_name: str
    agenda_name: str
    form: str
    agenda: Agenda
    grades: dict[str, np.ndarray]

    @property
    def label(self) -> str:
        return f"{self.agenda_name}, {self.form}"


def papers() -> list[Paper]:
    records = [
        json.loads(line) for line in (DATA / "ranking_papers.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return [Paper(id=r["id"], title=r["title"], abstract=r["abstract"]) for r in records]


def _grade_files(folder: Path, name: str) -> dict[str, Path]:
    if (folder / "first").is_dir():
        return {who: folder / who / f"{name}.json" for who in READERS}
    return {"first": folder / f"{name}.json", "second": folder / "second" / f"{name}.json"}


def cases(ids: list[str], sets: tuple[str, ...] = tuple(SETS)) -> Iterator[Case]:
    for set_name in sets:
        _, agendas, folder = SETS[set_name]
        for name in agendas:
            files = _grade_files(folder, name)
            if not all(p.exists() for p in files.values()):
                continue
            grades = {}
            for who, path in files.items():
                by_id = json.loads(path.read_text(encoding="utf-8"))["grades"]
                grades[who] = np.array([by_id[pid] for pid in ids])
            for form in FORMS:
                path = DATA / "agendas" / (f"{name}.md" if form == "para" else f"{name}-short.md")
                yield Case(set_name, name, form, load_agenda(path), grades)


@dataclass
class Fixture:
    """The labelled papers in a temporary store, with their stored vectors."""

    store: Store
    papers: list[Paper]
    ids: list[str]
    documents: list[str]
    vectors: dict[str, list[float]]
    matrix: np.ndarray


def open_fixture(tmp: str) -> Fixture:
    store = Store.open(load_settings(store=Path(tmp) / "store"))
    items = papers()
    store.upsert_papers(items)
    ids = [p.id for p in items]
    vectors = store.embeddings(ids)
    matrix = np.asarray([vectors[i] for i in ids], dtype=np.float32)
    return Fixture(store, items, ids, [p.document for p in items], vectors, matrix)


def temporary_fixture() -> tuple[tempfile.TemporaryDirectory[str], Fixture]:
    tmp = tempfile.TemporaryDirectory()
    return tmp, open_fixture(tmp.name)
