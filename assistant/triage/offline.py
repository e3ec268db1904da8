"""The offline engine: relevance without an LLM.

Each topic score mixes a lexical match with the embedding similarity between the paper and
the topic. The lexical match is the cosine of TF-IDF vectors over stemmed words, pairs of
adjacent stemmed words and, at a lower weight, the words as written but for a plural's -s
(sublinear tf, fitted on the whole store, so rare agenda terms count more than common ones, an
agenda's phrases count as phrases, and "adapters" is nearer "adapters" than "adaptation"). The
two signals are mixed in inverse proportion to their spread over the store, so that a terse
topic and a paragraph are both matched on words and meaning alike. Both sides are then expanded
once by pseudo-relevance feedback: the topic moves towards the papers that match it best on the
first pass, which finds papers that say the same thing in other words. Tags come from the
matching topics and the key phrases of the paper's title; the summary is the abstract's most
central sentence. Everything is labelled `offline`.

A topic's score as shown is 0-10, but papers are ranked on the unclipped mix: papers that all
match a topic as well as it gets keep their order instead of tying at 10.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import Stemmer
from scipy import sparse
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, HashingVectorizer, TfidfTransformer
from sklearn.preprocessing import normalize

from assistant.agenda import Agenda, Topic
from assistant.models import Assessment, TopicScore
from assistant.triage.keys import OFFLINE_ENGINE, OFFLINE_VERSION, engine_key
from assistant.triage.scoring import NEGATIVE_WEIGHT

ENGINE = OFFLINE_ENGINE
VERSION = OFFLINE_VERSION
# Weight of the embedding similarity in a topic score (the rest is lexical).
EMBEDDING_WEIGHT = 0.6
# (Below this many papers in the store; above, each topic's share follows the spreads of the
# two signals over the store, see _fusion_weight.)
FUSION_MIN_PAPERS = 20
# Pseudo-relevance feedback: the best-matching papers of the first pass (a 25th of the store,
# 3 to 20 of them) pull the topic's vector and its words this far towards their centroid.
FEEDBACK_PAPERS = 20
FEEDBACK_WEIGHT = 0.5
HASH_FEATURES = 2**20
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
# The short English stop list of Lucene, and words every abstract has.
_STOP = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with paper work approach method results show using based".split()
)
_HASHER = HashingVectorizer(
    analyzer=lambda tokens: tokens, n_features=HASH_FEATURES, alternate_sign=False, norm=None
)
_stemmer = Stemmer.Stemmer("english")
# Key phrases: spans of title words between punctuation and function words.
_LATEX = re.compile(r"\\[a-zA-Z]+\s*")
_LATEX_ARG = re.compile(r"\\[a-zA-Z]+\{([^{}]*)\}")  # \textit{word} in an abstract
_PHRASE_BREAK = re.compile(r"[:;,!?()\[\]{}\"`“”‘’|/&+]+|\.(?=\s|$)|\s[-–—]+\s|'s\b|'")
_FUNCTION = _STOP | ENGLISH_STOP_WORDS | {
    "vs", "via", "toward", "towards", "beyond", "without", "across", "let", "new", "novel", "study", "case"
}  # fmt: skip
PHRASE_WORDS = 3


def words(text: str) -> list[str]:
    """Lowercased words without stopwords (not stemmed)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def stems(text: str) -> list[str]:
    return list(_stemmer.stemWords(words(text)))


def grams(tokens: Sequence[str]) -> list[str]:
    """Stems and pairs of adjacent stems: what the lexical match compares."""
    return [*tokens, *(f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False))]


# Words as written (but for a plural's -s) beside the stems, at this share of a stem's weight.
EXACT_WEIGHT = 0.7
_EXACT_HASHER = HashingVectorizer(
    analyzer=lambda tokens: tokens, n_features=2**18, alternate_sign=False, norm=None
)


def _counts(texts: Sequence[str], text_stems: Sequence[Sequence[str]]) -> sparse.csr_matrix:
    """What the lexical match compares: stems and pairs of stems, and beside them the words
    as written but for a plural's -s, so an exact word counts beyond its stem ("adapters" is
    closer to "adapters" than to "adaptation")."""
    return sparse.hstack(
        [
            _HASHER.transform([grams(t) for t in text_stems]),
            _EXACT_HASHER.transform([[singular(w) for w in words(text)] for text in texts]),
        ]
    ).tocsr()


def _weigh(matrix: sparse.spmatrix) -> sparse.csr_matrix:
    """TF-IDF rows with the exact words down-weighted, L2-normalised."""
    out = sparse.csr_matrix(matrix, dtype=np.float64)
    out.data[out.indices >= HASH_FEATURES] *= EXACT_WEIGHT
    return normalize(out, copy=False)


def singular(word: str) -> str:
    """Harman's S-stemmer: the plural's -s off and nothing else ("heads" -> "head", "adapters"
    -> "adapter", but "adaptation" stays itself)."""
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


@dataclass
class Corpus:
    """Lexical statistics over every document in the store (and, when given, every vector)."""

    ids: list[str]
    matrix: sparse.csr_matrix  # TF-IDF rows, L2-normalised
    transformer: TfidfTransformer
    df: Mapping[str, int]  # in how many documents each stem is
    vectors: np.ndarray | None = None  # the papers' embeddings, in `ids` order

    @classmethod
    def build(
        cls,
        ids: Sequence[str],
        documents: Sequence[str],
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> Corpus:
        tokens = [stems(d) for d in documents]
        df: Counter[str] = Counter()
        for toks in tokens:
            df.update(set(toks))
        return cls.of_counts(ids, _counts(documents, tokens), df, vectors)

    @classmethod
    def of_counts(
        cls,
        ids: Sequence[str],
        counts: sparse.csr_matrix,
        df: Mapping[str, int],
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> Corpus:
        """The corpus of documents whose term counts (`_counts`, a row per id) and stems'
        document frequencies were worked out already (`assistant.triage.lexicon` keeps them)."""
        transformer = TfidfTransformer(sublinear_tf=True, norm=None).fit(counts)
        matrix = _weigh(transformer.transform(counts)).tocsr()
        aligned = None
        if vectors is not None and ids and all(pid in vectors for pid in ids):
            aligned = np.asarray([vectors[pid] for pid in ids], dtype=np.float32)
        return cls(list(ids), matrix, transformer, df, aligned)

    def idf(self, stem: str) -> float:
        n = max(len(self.ids), 1)
        df = self.df.get(stem, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def query(self, text: str) -> np.ndarray:
        """A text's TF-IDF vector (dense, L2-normalised) in the store's statistics."""
        row = _weigh(self.transformer.transform(_counts([text], [stems(text)])))
        return np.asarray(row.toarray(), dtype=np.float64).ravel()

    def scores(self, query: str | np.ndarray) -> np.ndarray:
        """Cosine of every document with the query (a text, or a vector from `query`)."""
        q = self.query(query) if isinstance(query, str) else query
        if not q.any():
            return np.zeros(len(self.ids), dtype=np.float64)
        return np.asarray(self.matrix @ q, dtype=np.float64).ravel()


def _lexical_top(raw: np.ndarray) -> float:
    """What counts as a full lexical match: the best matches in the store (robust to one outlier)."""
    positive = raw[raw > 0]
    if positive.size == 0:
        return 1.0
    return max(float(np.percentile(positive, 99)) if positive.size >= 100 else float(positive.max()), 1e-9)


def _scale_lexical(raw: np.ndarray) -> np.ndarray:
    """Lexical scores relative to the best matches in the store, 0..1 (for display)."""
    return np.clip(raw / _lexical_top(raw), 0.0, 1.0)


def _cosine_scale(cos: np.ndarray) -> np.ndarray:
    """Cosine similarity on the engine's scale: 0 unrelated, 1 as related as it gets (unclipped)."""
    return (cos - COSINE_LOW) / COSINE_SPAN


def squash(value: float) -> float:
    """An unclipped score onto 0..10, order kept: unchanged in 0.5..9, then flattening towards
    0 and 10 without reaching them, so papers above the scale still rank among themselves."""
    if value > 9.0:
        return 10.0 - math.exp(-(value - 9.0))
    if value < 0.5:
        return 0.5 * math.exp((value - 0.5) / 0.5)
    return value


@dataclass
class _Query:
    """One topic as the engine matches it, after feedback: its vector and its words."""

    vector: np.ndarray
    words: np.ndarray
    top: float  # the lexical score that counts as a full match in this store
    empty: bool
    embedding_weight: float = EMBEDDING_WEIGHT


def _fusion_weight(lexical: np.ndarray, cosine: np.ndarray) -> float:
    """The embedding's share in a topic's mix: each signal weighs in inverse proportion to its
    spread over the store, so both count alike whatever the agenda's wording (a three-word
    topic spreads the cosine thin, a paragraph the lexical match); ranking on the mix is then
    ranking on the sum of the two z-scores, and the mix keeps the 0..1 scale. A store too small
    to measure a spread keeps the fixed share; neither signal ever counts for less than a fifth."""
    spread_lexical, spread_cosine = float(np.std(lexical)), float(np.std(cosine))
    if len(lexical) < FUSION_MIN_PAPERS or spread_lexical + spread_cosine <= 0:
        return EMBEDDING_WEIGHT
    return float(np.clip(spread_lexical / (spread_lexical + spread_cosine), 0.2, 0.8))


class OfflineEngine:
    """Scores papers against an agenda with TF-IDF + embedding similarity and feedback."""

    name = ENGINE

    def __init__(self, agenda: Agenda, embed: Callable[[list[str]], Any]) -> None:
        self.agenda = agenda
        self.topic_vectors = np.asarray(embed([t.text for t in agenda.topics]), dtype=np.float32)
        # Topics that give a tag: not "Not interested", not a headless file's placeholder name.
        self.tag_topics = {t.name for t in agenda.topics if t.named and not t.negative}
        self._queries: tuple[int, list[_Query]] | None = None

    def queries(self, corpus: Corpus) -> list[_Query]:
        """Each topic's vector and words, expanded by feedback from this store's best matches
        (worked out once per store)."""
        if self._queries is not None and self._queries[0] == id(corpus):
            return self._queries[1]
        out = []
        k = int(np.clip(len(corpus.ids) // 25, 3, FEEDBACK_PAPERS))
        for topic, vector in zip(self.agenda.topics, self.topic_vectors, strict=True):
            words = corpus.query(topic.text) if topic.text else np.zeros(0)
            if not topic.text or not words.any():
                out.append(_Query(vector, words, 1.0, empty=not topic.text))
                continue
            lexical = corpus.scores(words)
            first = (1 - EMBEDDING_WEIGHT) * lexical / _lexical_top(lexical)
            if corpus.vectors is not None:
                first = first + EMBEDDING_WEIGHT * _cosine_scale(corpus.vectors @ vector)
            best = np.argsort(-first, kind="stable")[:k]
            if corpus.vectors is not None:
                vector = vector + FEEDBACK_WEIGHT * corpus.vectors[best].mean(axis=0)
                vector = vector / (np.linalg.norm(vector) or 1.0)
            centroid = np.asarray(corpus.matrix[best].mean(axis=0)).ravel()
            words = words + FEEDBACK_WEIGHT * centroid / (np.linalg.norm(centroid) or 1.0)
            lexical = corpus.scores(words)
            top = _lexical_top(lexical)
            weight = EMBEDDING_WEIGHT
            if corpus.vectors is not None:
                weight = _fusion_weight(lexical / top, _cosine_scale(corpus.vectors @ vector))
            out.append(_Query(vector.astype(np.float32), words, top, empty=False, embedding_weight=weight))
        self._queries = (id(corpus), out)
        return out

    def components(
        self, corpus: Corpus, targets: Sequence[str], vectors: Mapping[str, Sequence[float]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(lexical, cosine) per paper and topic: the two signals the engine mixes, the lexical
        one relative to the store's best matches (1 is a full match; not clipped)."""
        index = {pid: i for i, pid in enumerate(corpus.ids)}
        rows = np.array([index[p] for p in targets], dtype=np.int64)
        queries = self.queries(corpus)
        matrix = corpus.matrix[rows]
        lexical = np.zeros((len(targets), len(queries)))
        for j, q in enumerate(queries):
            if q.words.any():
                lexical[:, j] = np.asarray(matrix @ q.words).ravel() / q.top
        width = self.topic_vectors.shape[1]
        mat = np.asarray([vectors[p] for p in targets], dtype=np.float32).reshape(len(targets), width)
        cosine = mat @ np.stack([q.vector for q in queries]).T
        # A topic with nothing to match (a bare "## Not interested") matches nothing.
        cosine[:, [q.empty for q in queries]] = 0.0
        return lexical, cosine

    def mix(self, corpus: Corpus, lexical: np.ndarray, cosine: np.ndarray) -> np.ndarray:
        """Topic scores on a 0..1 scale, not clipped (above 1: better than a full match)."""
        scaled = _cosine_scale(cosine)
        scaled[cosine == 0.0] = 0.0
        weight = np.array([q.embedding_weight for q in self.queries(corpus)])
        return np.asarray(weight * scaled + (1 - weight) * lexical, dtype=np.float64)

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
        mixed = self.mix(corpus, lexical, cosine)
        negative = [t.negative for t in self.agenda.topics]
        out: dict[str, Assessment] = {}
        for r, pid in enumerate(targets):
            doc = documents[pid]
            topics = [
                TopicScore(
                    topic=topic.name,
                    score=int(round(10 * min(max(float(mixed[r, j]), 0.0), 1.0))),
                    reason=self._reason(topic, doc, float(cosine[r, j])),
                )
                for j, topic in enumerate(self.agenda.topics)
            ]
            positive = [10 * float(mixed[r, j]) for j in range(len(topics)) if not negative[j]]
            penalty = sum(max(0.0, 10 * float(mixed[r, j])) for j in range(len(topics)) if negative[j])
            best = max(positive, default=0.0) - NEGATIVE_WEIGHT * penalty
            out[pid] = Assessment(
                tags=self._tags(doc, topics, corpus),
                summary=summarize(doc, corpus),
                topics=topics,
                # Ranked on the unclipped scores: no ties at the top or the bottom of the scale.
                relevance=round(squash(best), 4),
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
