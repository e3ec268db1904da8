"""The personal model trained in a process of its own, so the review UI never waits on it.

At 100k papers one training holds the interpreter for seconds (numpy's indexing, the solver's
loop between its matrix products): in the review UI's process every keypress waited behind
it. The UI hands training to a child (`python -m assistant.personal.process`, started on the
first retrain and kept for the next ones): it sends what `rank` reads of each paper, in
columns pickled a slice at a time (no single step holds the UI's interpreter for long); the
child reads the same text features from their cache files (memory-mapped), trains exactly as
`rank` does in a command, keeps the training beside the features (`Trained`, as a command
would) and sends it back. The UI then ranks with it, which trains nothing: the kept training's
key is the one the UI computes from the same inputs.

The child runs at a lower priority and on one BLAS thread, so on two cores the UI keeps one.
If it cannot be started, dies or fails, `Trainer.train` says why and the UI trains in its own
thread as before; the next retrain starts a new child.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from assistant.personal.features import TextFeatures
from assistant.personal.model import Fit
from assistant.personal.ranking import FeatureCache, Ranking, learned_topics, rank
from assistant.personal.rows import PaperRow, PaperTable
from assistant.personal.state import Trained

SLICE = 5_000  # rows pickled at a time: a few milliseconds each at most
_HEADER = struct.Struct(">Q")


class TrainerError(Exception):
    """The child could not train (it is restarted for the next retrain)."""


def _values(row: Any) -> tuple[Any, ...]:
    day = getattr(row, "day", None)
    return (row.id, row.title, row.relevance, row.topics, row.status, row.starred, row.seed, day)


@dataclass
class Job:
    features: Path  # the text features' cache file (`TextFeatures.cache_path`)
    location: str  # the store they belong to (`TextFeatures.location`)
    folder: Path  # where the training is kept (`cache_folder`)
    topics: list[str]  # the agenda's topics
    with_estimate: bool
    papers: int = 0  # how many papers there are
    changed: int = -1  # how many changed papers follow (their place and values); -1: all follow


class Trainer:
    """The UI's side: one child, started when first needed, kept until `close`."""

    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._sent: list[Any] = []  # the rows the child holds (the same objects: rows are immutable)

    def rank(self, job: Job, rows: Sequence[Any], texts: TextFeatures, cache: FeatureCache) -> Ranking:
        """The ranking `rank(texts, rows, job.topics, ...)` gives, trained in the child (which
        keeps the training on disk as a command does; the ranking's `trained` is None).
        `rows` are objects with `PaperState`'s attributes, immutable (a changed paper is a new
        object): only those not sent before are sent. Raises TrainerError when the child could
        not: the caller ranks itself then."""
        with self._lock:
            child = self._start()
            assert child.stdin is not None and child.stdout is not None
            job.papers = len(rows)
            changed: list[int] | None = None
            if len(self._sent) == len(rows):
                sent = self._sent
                changed = [i for i, row in enumerate(rows) if row is not sent[i]]
                if len(changed) > len(rows) // 2:
                    changed = None
            job.changed = -1 if changed is None else len(changed)
            try:
                _send(child.stdin, job)
                if changed is None:
                    for start in range(0, len(rows), SLICE):
                        _send(child.stdin, [_values(r) for r in rows[start : start + SLICE]])
                else:
                    for start in range(0, len(changed), SLICE):
                        _send(child.stdin, [(i, _values(rows[i])) for i in changed[start : start + SLICE]])
                child.stdin.flush()
                self._sent = list(rows)
                outcome, value = _receive(child.stdout)
            except (OSError, EOFError, pickle.UnpicklingError, struct.error) as exc:
                self._stop()
                raise TrainerError(f"the training process stopped ({type(exc).__name__})") from exc
            if outcome != "ok":
                self._stop()  # a fresh child next time, in case its state is what failed
                raise TrainerError(str(value))
        fields, scores = value
        ranking: Ranking = Ranking.__new__(Ranking)  # its fields and what __post_init__ made of them
        ranking.__dict__.update(fields)
        ranking.ids = [r.id for r in rows]
        ranking.titles = [r.title for r in rows]
        ranking.position = {pid: i for i, pid in enumerate(ranking.ids)}
        ranking.features = cache.get(texts, ranking.ids, scores)
        ranking.terms = texts.term_reader()
        return ranking

    def start(self) -> None:
        """Start the child now (it reads its libraries while the UI starts); no error if not."""
        with self._lock:
            try:
                self._start()
            except TrainerError:
                pass  # said on the first retrain

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        self._sent = []  # a new child holds no rows
        env = dict(os.environ)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = "1"
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "assistant.personal.process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # the terminal is the UI's
                env=env,
                close_fds=True,
            )
        except OSError as exc:
            raise TrainerError(f"the training process could not start ({exc.strerror or exc})") from exc
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        self._sent = []
        if child is None:
            return
        try:
            if child.stdin is not None:
                child.stdin.close()
        except OSError:
            pass
        if child.poll() is None:
            child.kill()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a child that ignores SIGKILL
            pass
        if child.stdout is not None:
            child.stdout.close()


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


# -- the child ------------------------------------------------------------------------------


class _Child:
    """What the child keeps between trainings: the papers, the features it read, the last fit."""

    def __init__(self) -> None:
        self.papers: list[PaperRow] = []
        # The same papers as columns, what `rank` reads fastest (a list of rows is read paper by
        # paper: its topic scores alone took a fifth of a retrain at 100k papers).
        self.table: PaperTable | None = None
        self.texts: TextFeatures | None = None
        self.read: tuple[Path, str, int, int] | None = None
        self.cache = FeatureCache()
        self.previous: Fit | None = None

    def take(self, job: Job, source: IO[bytes]) -> None:
        """The papers that follow the job: all of them, or the changed ones."""
        if job.changed < 0:
            self.papers, self.table = [], None
            while len(self.papers) < job.papers:
                self.papers.extend(PaperRow(*values) for values in _receive(source))
            return
        if len(self.papers) != job.papers:
            raise TrainerError("the papers sent before are not the ones changed now")
        taken = 0
        changed: list[PaperRow] = []
        while taken < job.changed:
            part = _receive(source)
            for i, values in part:
                self.papers[i] = PaperRow(*values)
                changed.append(self.papers[i])
                if self.table is not None and self.table.ids[i] != self.papers[i].id:
                    self.table = None  # another paper in this place: made again from the rows
            taken += len(part)
        if self.table is not None:
            self.table = self.table.update(changed)

    def columns(self) -> PaperTable:
        """The papers as columns (made once, then brought up to date with the changed rows)."""
        if self.table is None:
            self.table = PaperTable.of_rows(self.papers)
        return self.table

    def rank(self, job: Job) -> tuple[dict[str, Any], Any]:
        stat = job.features.stat()
        read = (job.features, job.location, stat.st_mtime_ns, stat.st_size)
        if self.texts is None or read != self.read:
            texts = TextFeatures._read(job.features, job.location)
            if texts is None:
                raise TrainerError("the text features on disk are not this store's")
            self.texts, self.read = texts, read
        saved = Trained.load(job.folder) or Trained(b"", None, None)
        papers, previous = self.columns(), self.previous
        ranking = rank(self.texts, papers, job.topics, previous, self.cache, job.with_estimate, saved)
        self.previous = ranking.fit
        if ranking.trained is not None and ranking.trained is not saved:
            try:
                ranking.trained.save(job.folder, saved)
            except OSError:
                pass  # only a cache: the UI ranks with what is sent back
        # What the UI has already is not sent back: the papers' ids and titles, the features
        # (the same files), the training (on disk; the UI reads it only to train itself).
        fields = dict(vars(ranking))
        fields.update(ids=None, titles=None, position=None, features=None, terms=None, trained=None)
        return fields, learned_topics(papers, job.topics)[1]


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """Answer jobs until the UI closes the pipe."""
    child = _Child()
    while True:
        try:
            job = _receive(source)
        except EOFError:
            return
        try:
            child.take(job, source)
            answer: tuple[str, Any] = ("ok", child.rank(job))
        except Exception as exc:  # the UI ranks itself, and says why
            answer = ("error", f"{type(exc).__name__}: {exc}")
            child.papers = []
        _send(sink, answer)
        sink.flush()


def main() -> None:
    try:
        os.nice(5)  # the UI's keypresses first
    except OSError:  # pragma: no cover - not allowed here
        pass
    # The answers go out on a copy of stdout; anything a library prints goes nowhere.
    sink = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    serve(sys.stdin.buffer, sink)


if __name__ == "__main__":
    main()
