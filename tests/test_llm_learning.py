"""The LLM learns from decisions too: calibration examples in the prompt, scores calibrated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_llm import FakeLLM
from scipy import sparse
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from assistant.models import Status
from assistant.personal.model import Labels, blend, features, fit, scores
from assistant.store import Store

AGENDA_TEXT = (
    "## Multilingual adapters\nAdapters and parameter-efficient transfer to many languages.\n\n"
    "## Interpretability\nAttention heads, probing and circuits in language models.\n"
)
TITLES = [
    ("Adapters for multilingual transfer", "We train adapters for many languages."),
    ("Language adapters for African languages", "Adapters transfer to low-resource languages."),
    ("Attention heads that track syntax", "We probe attention heads in language models."),
    ("Circuits for indirect object identification", "We find circuits and attention heads."),
    ("Probing multilingual models for syntax", "We probe multilingual models with adapters."),
    ("Streaming speech recognition", "An audio speech recognition model."),
    ("Protein folding with diffusion", "Diffusion models generate protein backbones."),
    ("Adapter fusion across tasks", "We combine adapters trained on many tasks."),
]


def cli(fake: FakeLLM, *args: str) -> Any:
    env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test", "COLUMNS": "160"}
    return CliRunner().invoke(app, list(args), env=env)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def project(isolated: Path) -> Path:
    (isolated / "agenda.md").write_text(AGENDA_TEXT)
    lines = [json.dumps({"title": t, "abstract": a}) for t, a in TITLES]
    (isolated / "papers.jsonl").write_text("\n".join(lines) + "\n")
    assert CliRunner().invoke(app, ["ingest", "papers.jsonl"]).exit_code == 0
    return isolated


def ids_by_title() -> dict[str, str]:
    store = Store.open(load_settings())
    return {i.paper.title: i.paper.id for i in store.iter_all()}


def user_prompts(fake: FakeLLM) -> list[str]:
    return [m["content"] for r in fake.requests for m in r["messages"] if m["role"] == "user"]


def test_examples_put_the_nearest_decisions_in_the_prompt_and_the_key(project: Path, fake: FakeLLM) -> None:
    ids = ids_by_title()
    accepted, rejected = ids[TITLES[0][0]], ids[TITLES[5][0]]
    assert CliRunner().invoke(app, ["mark", accepted, "--accept", "--star"]).exit_code == 0
    assert CliRunner().invoke(app, ["mark", rejected, "--reject"]).exit_code == 0
    first = cli(fake, "tag", "--examples", "2")
    assert first.exit_code == 0, first.output
    assert fake.calls == len(TITLES)
    prompts = user_prompts(fake)
    assert all("How this researcher decided" in p for p in prompts)
    about_adapters = next(
        p for p in prompts if "Language adapters for African languages" in p.split("<<<END")[0]
    )
    assert f"- accepted and starred (a must-read): {TITLES[0][0]}" in about_adapters
    # The paper itself is never its own example.
    own = next(p for p in prompts if f"Title: {TITLES[0][0]}" in p)
    assert TITLES[0][0] not in own.split("How this researcher decided")[1]
    # Unchanged decisions: nothing to do, and nothing shows as stale.
    again = cli(fake, "tag", "--examples", "2")
    assert fake.calls == len(TITLES) and "0 LLM calls" in again.output
    assert "stale" not in cli(fake, "ranked", "--top", "20").output
    # A new decision changes the examples of the papers near it: those are asked again.
    assert CliRunner().invoke(app, ["mark", ids[TITLES[7][0]], "--reject"]).exit_code == 0
    third = cli(fake, "tag", "--examples", "2")
    assert third.exit_code == 0 and len(TITLES) < fake.calls < 2 * len(TITLES)
    # Without examples the key is the plain one again: every paper is asked once more.
    plain = cli(fake, "tag")
    assert plain.exit_code == 0 and "How this researcher decided" not in user_prompts(fake)[-1]


def test_examples_come_from_the_config_too(project: Path, fake: FakeLLM) -> None:
    ids = ids_by_title()
    assert CliRunner().invoke(app, ["mark", ids[TITLES[0][0]], "--accept"]).exit_code == 0
    (project / "config.toml").write_text("examples = 1\n")
    result = cli(fake, "--config", str(project / "config.toml"), "tag")
    assert result.exit_code == 0
    others = [p for p in user_prompts(fake) if f"Title: {TITLES[0][0]}" not in p]
    assert len(others) == len(TITLES) - 1 and all("How this researcher decided" in p for p in others)


def test_the_model_learns_which_topic_the_researcher_wants() -> None:
    """Two topics the engine scores alike; the researcher accepts one and rejects the other:
    the model, which reads the topic scores, puts the wanted topic first (the engine alone
    cannot)."""
    rng = np.random.default_rng(0)
    n = 200
    topic_a = rng.integers(0, 11, n).astype(float)
    topic_b = np.where(topic_a > 5, rng.integers(0, 5, n), rng.integers(5, 11, n)).astype(float)
    topics = np.stack([topic_a, topic_b], axis=1)
    engine = topics.max(axis=1) + rng.random(n) * 0.01
    words = sparse.csr_matrix(rng.random((n, 30)) < 0.05, dtype=float)
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    X = features(words, vectors, topics)
    order = np.argsort(-engine)
    statuses = [Status.NEW] * n
    for i in order[:40]:  # the top of the queue, decided: topic A wanted, topic B not
        statuses[i] = Status.ACCEPTED if topic_a[i] >= topic_b[i] else Status.REJECTED
    labels = Labels.from_decisions(statuses, [False] * n)
    result = fit(X, engine, labels, [f"p{i}" for i in range(n)])
    assert result.personal, result.note
    blended = blend(result, engine, scores(result, X))
    rest = np.flatnonzero(np.array(statuses) == Status.NEW)
    top = rest[np.argsort(-blended[rest])][:15]
    assert (topic_a[top] >= topic_b[top]).mean() > 0.8
