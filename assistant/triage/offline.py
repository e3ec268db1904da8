"""The offline engine: relevance without an LLM.

Each topic score mixes a lexical match (BM25 over the whole store, so rare agenda terms count
more than common ones) with the embedding similarity between the paper and the topic. Tags
come from the matching topics and the key phrases of the paper's title; the summary is the
abstract's most central sentence. Everything is labelled `offline`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS

from assistant.agenda import Agenda, Topic
from assistant.models import Assessment, TopicScore
from assistant.triage.scoring import relevance_from_scores

ENGINE = "offline"
VERSION = "offline-4"
# Weight of the embedding similarity in a topic score (the rest is lexical).
EMBEDDING_WEIGHT = 0.7
# Cosine similarities of MiniLM between a topic and an abstract: below LOW is unrelated,
# LOW + SPAN and above is as related as it gets.
COSINE_LOW = 0.15
COSINE_SPAN = 0.45
TAG_TOPIC_MIN = 6
SUMMARY_WORDS = 30

# A word starts with a letter (any script) and may hold digits and hyphens: "gpt-3", "schrödinger".
_WORD = re.compile(r"[^\W\d_](?:[\w\-]*[^\W_])?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")
_CUES = re.compile(
    r"\b(we (propose|present|introduce|show|find|demonstrate)|this (paper|work)|our results)\b", re.I
)
_STOP = frozenset(STOPWORDS_EN) | {"paper", "work", "approach", "method", "results", "show", "using", "based"}
_stemmer = Stemmer.Stemmer("english")
# Key phrases: spans of title words between punctuation and function words.
_LATEX = re.compile(r"\\[a-zA-Z]+\s*")
_LATEX_ARG = re.compile(r"\\[a-zA-Z]+\{([^{}]*)\}")  # \textit{word} in an abstract
_PHRASE_BREAK = re.compile(r"[:;,!?()\[\]{}\"`“”‘’|/&+]+|\.(?=\s|$)|\s[-–—]+\s|'s\b|'")
_FUNCTION = _STOP | frozenset(STOPWORDS_EN_PLUS) | {
    "vs", "via", "toward", "towards", "beyond", "without", "across", "let", "new", "novel", "study", "case"
}  # fmt: skip
PHRASE_WORDS = 3


def words(text: str) -> list[str]:
    """Lowercased words without stopwords (not stemmed)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def stems(text: str) -> list[str]:
    return list(_stemmer.stemWords(words(text)))


def engine_key(document: str, agenda: Agenda) -> str:
    """The cache key of an offline assessment: changes with the paper, the agenda or the engine."""
    raw = "\x1f".join([VERSION, agenda.hash, document])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


@dataclass
class Corpus:
    """BM25 statistics over every document in the store."""

    ids: list[str]
    retriever: bm25s.BM25
    df: Counter[str]

    @classmethod
    def build(cls, ids: Sequence[str], documents: Sequence[str]) -> Corpus:
        tokens = [stems(d) for d in documents]
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        df: Counter[str] = Counter()
        for toks in tokens:
            df.update(set(toks))
        return cls(list(ids), retriever, df)

    def idf(self, stem: str) -> float:
        n = max(len(self.ids), 1)
        df = self.df.get(stem, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        terms = [t for t in dict.fromkeys(stems(query)) if t in self.df]
        if not terms:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self.retriever.get_scores(terms), dtype=np.float32)


def _scale_lexical(raw: np.ndarray) -> np.ndarray:
    """BM25 scores to 0..1 relative to the best matches in the store (robust to one outlier)."""
    positive = raw[raw > 0]
    if positive.size == 0:
        return np.zeros_like(raw)
    top = float(np.percentile(positive, 99)) if positive.size >= 100 else float(positive.max())
    return np.clip(raw / max(top, 1e-9), 0.0, 1.0)


def _scale_cosine(cos: np.ndarray) -> np.ndarray:
    return np.clip((cos - COSINE_LOW) / COSINE_SPAN, 0.0, 1.0)


class OfflineEngine:
    """Scores papers against an agenda with BM25 + embedding similarity."""

    name = ENGINE

    def __init__(self, agenda: Agenda, embed: Callable[[list[str]], Any]) -> None:
        self.agenda = agenda
        self.topic_vectors = np.asarray(embed([t.text for t in agenda.topics]), dtype=np.float32)
        # Topics that give a tag: not "Not interested", not a headless file's placeholder name.
        self.tag_topics = {t.name for t in agenda.topics if t.named and not t.negative}

    def components(
        self, corpus: Corpus, targets: Sequence[str], vectors: Mapping[str, Sequence[float]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(lexical 0..1, cosine) per paper and topic: the two signals the engine mixes."""
        index = {pid: i for i, pid in enumerate(corpus.ids)}
        rows = np.array([index[p] for p in targets], dtype=np.int64)
        lexical = np.stack([_scale_lexical(corpus.scores(t.text))[rows] for t in self.agenda.topics], axis=1)
        width = self.topic_vectors.shape[1]
        mat = np.asarray([vectors[p] for p in targets], dtype=np.float32).reshape(len(targets), width)
        cosine = mat @ self.topic_vectors.T
        # A topic with nothing to match (a bare "## Not interested") matches nothing.
        cosine[:, [not t.text for t in self.agenda.topics]] = 0.0
        return lexical, cosine

    def assess(
        self,
        corpus: Corpus,
        documents: dict[str, str],
        vectors: Mapping[str, Sequence[float]],
    ) -> dict[str, Assessment]:
        """Assess the given papers (all of which must be in the corpus)."""
        known = set(corpus.ids)
        targets = [pid for pid in documents if pid in known]
        lexical, cosine = self.components(corpus, targets, vectors)
        mixed = EMBEDDING_WEIGHT * _scale_cosine(cosine) + (1 - EMBEDDING_WEIGHT) * lexical
        out: dict[str, Assessment] = {}
        for r, pid in enumerate(targets):
            doc = documents[pid]
            topics = [
                TopicScore(
                    topic=topic.name,
                    score=int(round(10 * float(mixed[r, j]))),
                    reason=self._reason(topic, doc, float(cosine[r, j])),
                )
                for j, topic in enumerate(self.agenda.topics)
            ]
            out[pid] = Assessment(
                tags=self._tags(doc, topics, corpus),
                summary=summarize(doc, corpus),
                topics=topics,
                # From the unrounded topic scores, so that papers do not tie in tens.
                relevance=relevance_from_scores(
                    {t.name: 10 * float(mixed[r, j]) for j, t in enumerate(self.agenda.topics)},
                    self.agenda,
                    digits=2,
                ),
                engine=ENGINE,
                model=VERSION,
                key=engine_key(doc, self.agenda),
                agenda_hash=self.agenda.hash,
            )
        return out

    @staticmethod
    def _reason(topic: Topic, document: str, cosine: float) -> str:
        doc_stems = set(stems(document))
        matched = [
            w
            for w in dict.fromkeys(words(topic.text))
            if w not in _FUNCTION and _stemmer.stemWord(w) in doc_stems
        ]
        terms = ", ".join(f"'{w}'" for w in matched[:5]) if matched else "no agenda terms"
        return f"offline: matches {terms}; semantic similarity {cosine:.2f}"

    def _tags(self, document: str, topics: list[TopicScore], corpus: Corpus) -> list[str]:
        tags = [
            " ".join(words(t.topic)[: PHRASE_WORDS + 1]) or t.topic.casefold()
            for t in sorted(topics, key=lambda t: -t.score)
            if t.score >= TAG_TOPIC_MIN and t.topic in self.tag_topics
        ][:2]
        topic_words = {w for tag in tags for w in tag.split()}
        taken: set[str] = set()
        for phrase, key in keyphrases(document, corpus):
            if len(tags) >= 5 or (len(tags) >= 2 and not key):
                break
            words_ = set(phrase.split())
            if not words_ & taken and not words_ <= topic_words:
                tags.append(phrase)
                taken |= words_
        return tags


def keyphrases(document: str, corpus: Corpus) -> list[tuple[str, bool]]:
    """The title's phrases, best first, each with whether it is a key phrase.

    Candidates are the spans of up to three words in the title's runs of content words (runs
    end at punctuation and function words). A key phrase recurs in the abstract and its words
    together are as distinctive in the store as one rare word; key phrases rank by that
    distinctiveness. The rest follow, for a title with no key phrase, without spans that open
    with a verb in -ing ("leveraging ...")."""
    title, _, abstract = document.partition("\n\n")
    body = " " + " ".join(_stemmer.stemWords(_WORD.findall(abstract.lower()))) + " "
    rare = corpus.idf("") / 2  # half the idf of a word no paper has
    scored: dict[str, tuple[bool, float]] = {}
    for run in _runs(title):
        for start in range(len(run)):
            for end in range(start + 1, min(start + PHRASE_WORDS, len(run)) + 1):
                phrase = run[start:end]
                phrase_stems = _stemmer.stemWords(phrase)
                weight = sum(corpus.idf(s) for s in phrase_stems)
                key = weight >= rare and f" {' '.join(phrase_stems)} " in body
                if not key and start == 0 and len(run) > 1 and run[0].endswith("ing") and len(run[0]) > 5:
                    continue  # "leveraging ..." opening a title
                scored[" ".join(phrase)] = (key, weight)
    ranked = sorted(scored.items(), key=lambda kv: (not kv[1][0], -kv[1][1]))
    return [(phrase, key) for phrase, (key, _) in ranked]


def _runs(text: str) -> list[list[str]]:
    runs: list[list[str]] = []
    text = _LATEX.sub("", text).replace("{", "").replace("}", "")  # "\textbf{D}ual" is "Dual"
    for chunk in _PHRASE_BREAK.split(text.lower()):
        run: list[str] = []
        for token in _WORD.findall(chunk):
            if token in _FUNCTION or len(token) < 2:
                if run:
                    runs.append(run)
                run = []
            else:
                run.append(token)
        if run:
            runs.append(run)
    return runs


def summarize(document: str, corpus: Corpus) -> str:
    """The abstract's most central sentence (shared distinctive terms, cue phrases preferred)."""
    abstract = document.split("\n\n", 1)[1] if "\n\n" in document else document
    sentences = [s.strip() for s in _SENTENCE.split(abstract) if len(s.split()) >= 5]
    if not sentences:
        return _clip_words(abstract or document)
    tokenized = [set(stems(s)) for s in sentences]
    totals: Counter[str] = Counter()
    for toks in tokenized:
        totals.update(toks)

    def score(i: int) -> float:
        toks = tokenized[i]
        shared = sum(corpus.idf(t) for t in toks if totals[t] > 1)
        bonus = 1.5 if _CUES.search(sentences[i]) else 1.0
        return bonus * shared / math.sqrt(len(toks) + 1)

    return _clip_words(_LATEX_ARG.sub(r"\1", sentences[max(range(len(sentences)), key=score)]))


def _clip_words(text: str, limit: int = SUMMARY_WORDS) -> str:
    parts = text.split()
    return " ".join(parts) if len(parts) <= limit else " ".join(parts[:limit]).rstrip(",;:") + " …"
