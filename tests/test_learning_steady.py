"""The learning loop as a researcher relies on it: steady, never burying a topic, honest about
what is left, and a stopping test that keeps its promise."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse
from typer.testing import CliRunner

from assistant.cli import app
from assistant.models import Status
from assistant.personal import TextFeatures, rank
from assistant.personal.stopping import RecallCheck, draws_to_stop, recall_p_value

runner = CliRunner()


@dataclass
class Paper:
    id: str
    title: str
    relevance: float | None
    topics: dict[str, int] | None
    status: Status = Status.NEW
    starred: bool = False
    seed: bool = False
    day: int | None = None


def library(seed: int = 0) -> tuple[TextFeatures, list[Paper], dict[str, list[int]]]:
    """240 papers: a topic the researcher wants in two kinds (A1, the wanted kind, and A2, off
    the agenda's point though on its words), a second topic B, and 150 papers of neither. Each
    kind shares words and a direction of its embedding; the engine rates A and B high."""
    rng = np.random.default_rng(seed)
    kinds = {"A1": 30, "A2": 10, "B": 50, "other": 150}
    vocabulary = 60
    directions = {k: rng.normal(size=16) for k in kinds}
    words_of = {"A1": [0, 1, 2, 3], "A2": [0, 1, 4, 5], "B": [10, 11, 12, 13], "other": []}
    papers: list[Paper] = []
    rows, cols, values, vectors = [], [], [], []
    groups: dict[str, list[int]] = {k: [] for k in kinds}
    for kind, count in kinds.items():
        for _ in range(count):
            i = len(papers)
            groups[kind].append(i)
            own = words_of[kind] + list(rng.choice(np.arange(20, vocabulary), 5, replace=False))
            for w in own:
                rows.append(i)
                cols.append(int(w))
                values.append(1.0)
            vector = directions[kind] + rng.normal(scale=0.6, size=16)
            vectors.append(vector / np.linalg.norm(vector))
            relevance = {"A1": 8.0, "A2": 8.2, "B": 7.0, "other": 3.0}[kind] + rng.normal(scale=0.6)
            topic_a = 8 if kind in ("A1", "A2") else 1
            topic_b = 8 if kind == "B" else 1
            papers.append(Paper(f"p{i:03d}", f"paper {i}", relevance, {"A": topic_a, "B": topic_b}))
    words = sparse.csr_matrix((values, (rows, cols)), shape=(len(papers), vocabulary))
    words = sparse.csr_matrix(words.multiply(1 / np.sqrt(words.sum(axis=1))))
    texts = TextFeatures(
        location="test",
        ids=[p.id for p in papers],
        words=words,
        vectors=np.array(vectors, dtype=np.float32),
        tfidf=None,
        position={p.id: i for i, p in enumerate(papers)},
    )
    return texts, papers, groups


def places(texts: TextFeatures, papers: list[Paper]) -> dict[str, int]:
    """Each undecided paper's place in the queue (1 = top)."""
    ranking = rank(texts, papers, ["A", "B"])  # type: ignore[arg-type]
    queue = [pid for pid in ranking.relevance_order() if ranking.undecided[ranking.position[pid]]]
    return {pid: k for k, pid in enumerate(queue, start=1)}


def test_rejections_of_unlike_papers_never_bury_a_topic_with_accepts() -> None:
    texts, papers, groups = library()
    for i in groups["A1"][:2]:
        papers[i].status = Status.ACCEPTED
    before = places(texts, papers)
    for i in groups["A2"][:3]:  # on the topic's words, off its point: unlike the accepted ones
        papers[i].status = Status.REJECTED
    after = places(texts, papers)
    wanted = [papers[i].id for i in groups["A1"][2:]]
    # The topic's papers of the accepted kind keep their places near the top: none falls more
    # than a few places (they share words with the rejected ones), none leaves the top 30.
    assert max(after[p] - before[p] for p in wanted) <= 10, [(before[p], after[p]) for p in wanted]
    assert max(after[p] for p in wanted) <= 30 and np.median([after[p] for p in wanted]) <= 16
    # What the rejections were like goes down, below every paper of the accepted kind.
    unwanted = [papers[i].id for i in groups["A2"][3:]]
    assert np.mean([after[p] - before[p] for p in unwanted]) > 0
    assert min(after[p] for p in unwanted) > max(after[p] for p in wanted)


def test_one_decision_moves_the_queue_a_little() -> None:
    """Working down the queue, one decision changes few of the top 20 (the share is the
    screening bench's churn)."""
    texts, papers, groups = library(seed=1)
    wanted = set(groups["A1"]) | set(groups["B"][:10])
    order = places(texts, papers)
    changes = []
    for _ in range(30):
        top = sorted(order, key=order.__getitem__)
        pick = int(top[0][1:])
        papers[pick].status = Status.ACCEPTED if pick in wanted else Status.REJECTED
        new = places(texts, papers)
        before20 = set(top[1:21])
        after20 = set(sorted(new, key=new.__getitem__)[:20])
        changes.append(1 - len(before20 & after20) / 20)
        order = new
    # The first accept of a kind moves more (it is the first evidence of it); most do little.
    assert np.mean(changes) <= 0.1 and np.median(changes) <= 0.05, changes


def test_the_estimate_of_relevant_papers_left_covers_the_truth() -> None:
    texts, papers, groups = library(seed=2)
    wanted = set(groups["A1"]) | set(groups["B"][:10])
    order = places(texts, papers)
    for _ in range(60):  # work down the queue
        pick = int(min(order, key=order.__getitem__)[1:])
        papers[pick].status = Status.ACCEPTED if pick in wanted else Status.REJECTED
        order = places(texts, papers)
    ranking = rank(texts, papers, ["A", "B"], with_estimate=True)  # type: ignore[arg-type]
    left = ranking.estimate
    assert left is not None
    truth = sum(1 for i in wanted if papers[i].status is Status.NEW)
    assert left.low <= truth <= left.high, (left, truth)
    assert left.undecided == sum(p.status is Status.NEW for p in papers)
    assert "relevant left among" in left.line()
    # Each undecided paper's chance of an accept: the estimate is their sum.
    assert ranking.chance is not None
    undecided = [ranking.position[p.id] for p in papers if p.status is Status.NEW]
    assert ranking.chance[undecided].sum() == pytest.approx(left.left, rel=1e-6)
    decided = [ranking.position[p.id] for p in papers if p.status is not Status.NEW]
    assert np.isnan(ranking.chance[decided]).all()


def test_no_estimate_from_too_few_decisions() -> None:
    texts, papers, groups = library(seed=3)
    papers[groups["A1"][0]].status = Status.ACCEPTED
    papers[groups["other"][0]].status = Status.REJECTED
    ranking = rank(texts, papers, ["A", "B"], with_estimate=True)  # type: ignore[arg-type]
    assert ranking.personal and ranking.estimate is None


def test_the_hypergeometric_test() -> None:
    # Nothing relevant in 300 random draws from 1,000 papers, 95 found before: recall of 95%
    # needs at most 5 relevant papers in the urn, and a sample of 300 with none makes 6 or more
    # unlikely (0.7^6 = 12%... with 6 the chance of missing all is hypergeometric).
    p = recall_p_value(urn=1000, drawn=300, found_in_sample=0, found_before=95, target=0.95)
    assert 0.0 < p < 0.2
    # More draws without a relevant paper: the p-value falls.
    assert recall_p_value(1000, 600, 0, 95, 0.95) < p
    # A relevant paper in the sample raises it.
    assert recall_p_value(1000, 300, 1, 95, 0.95) > p
    # The whole urn decided: the recall is known.
    assert recall_p_value(1000, 1000, 3, 95, 0.95) == 0.0
    more = draws_to_stop(1000, 300, 0, 95, 0.95, 0.05)
    assert more is not None and recall_p_value(1000, 300 + more, 0, 95, 0.95) < 0.05
    assert recall_p_value(1000, 300 + more - 1, 0, 95, 0.95) >= 0.05


def test_the_test_keeps_its_promise_over_many_draws() -> None:
    """Tested after every draw, the check stops with the recall (what was found before and in
    the sample) below the target in at most 5% of random draws at 95% confidence."""
    p_value = cache(recall_p_value)  # a pure function: the draws share its (k, hits) pairs
    rng = np.random.default_rng(0)
    urn, left, found = 2000, 12, 80  # 80 of 92 found when the check begins: 87%
    wrong = 0
    for _ in range(300):
        relevant = np.zeros(urn, dtype=bool)
        relevant[rng.choice(urn, left, replace=False)] = True
        hits = np.cumsum(relevant[rng.permutation(urn)])
        for k in range(1, urn + 1):
            if p_value(urn, k, int(hits[k - 1]), found, 0.95) < 0.05:
                wrong += (found + hits[k - 1]) / (found + left) < 0.95
                break
    assert wrong / 300 <= 0.05


def test_a_check_counts_decisions_made_outside_it() -> None:
    decisions = {f"p{i}": (Status.NEW, False) for i in range(100)}
    decisions.update({f"d{i}": (Status.ACCEPTED, False) for i in range(20)})
    check = RecallCheck.begin([p for p, (s, _) in decisions.items() if s is Status.NEW], seed="x")
    first = check.next_papers(decisions, 3)
    assert len(first) == 3 and first == check.next_papers(decisions, 3)  # the draw is fixed
    for pid in first:
        decisions[pid] = (Status.REJECTED, False)
        check.record(pid)
    # Decided from the queue meanwhile: out of the urn, among the papers found before.
    outside = next(p for p in check.urn if p not in first)
    decisions[outside] = (Status.ACCEPTED, False)
    result = check.result(decisions)
    assert (result.urn, result.drawn, result.relevant_in_sample, result.relevant_before) == (99, 3, 0, 21)
    assert outside not in check.next_papers(decisions, 100)
    # A new paper since the check began is not covered, and the result says so.
    decisions["late"] = (Status.NEW, False)
    assert check.result(decisions).left_out == 1
    again = RecallCheck.from_record(json.loads(json.dumps(check.to_record())))
    assert again.result(decisions) == check.result(decisions)


def test_triage_check_samples_at_random_and_says_when_to_stop(demo_store: Path) -> None:
    none = runner.invoke(app, ["check", "--status"])
    assert none.exit_code == 1 and "no check under way" in none.output
    # Decide two random papers (reject both), then quit.
    out = runner.invoke(app, ["check"], input="r\nr\nq\n", env={"COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    assert "random paper 1" in out.output and "random paper 2" in out.output
    assert "2 of" in out.output and "not yet shown" in out.output
    status = json.loads(runner.invoke(app, ["check", "--status", "--json"]).output.splitlines()[-1])
    assert status["drawn"] == 2 and status["relevant_in_sample"] == 0 and not status["reached"]
    # Going on later picks up where it stopped; a wrong key is asked again.
    more = runner.invoke(app, ["check"], input="x\nr\nq\n", env={"COLUMNS": "120"})
    assert "random paper 3" in more.output and "a, r, m or q" in more.output
    assert json.loads(runner.invoke(app, ["check", "--status", "--json"]).output)["drawn"] == 3
    # Rejecting every paper drawn: with nothing accepted before, the urn must be read whole or
    # nearly; the check ends when the test says so.
    ending = runner.invoke(app, ["check"], input="r\n" * 200, env={"COLUMNS": "120"})
    assert ending.exit_code == 0
    final = json.loads(runner.invoke(app, ["check", "--status", "--json"]).output)
    assert final["reached"], final
    assert "discarded" in runner.invoke(app, ["check", "--stop"]).output
