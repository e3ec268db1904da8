"""The research agenda: a Markdown file whose `##` headings are topics.

Text under a heading describes that topic. A topic named "Not interested" scores
negatively. A file with no `##` heading is a single topic (named by its `#` title, if any).
HTML comments are ignored, so a starter agenda can explain itself.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.errors import ConfigError

NOT_INTERESTED = "not interested"


def excludes(topic_name: str) -> bool:
    """Whether a topic of this name scores what the researcher does not want."""
    return topic_name.casefold() == NOT_INTERESTED


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_EXCLUSION = re.compile(r"(not|no|except|excluding|but not)\b", re.IGNORECASE)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Topic:
    name: str
    description: str
    negative: bool = False
    line: int = 0
    # False when the name is only a label (the placeholder of a file without headings or
    # title, or "Not interested"): it then takes no part in matching.
    named: bool = True

    @functools.cached_property
    def text(self) -> str:
        """What the topic is about, as one text for matching. Sentences that exclude
        something ("Not hate speech detection.") are left out: word and embedding matching
        would read them as interest. Exclusions belong under "Not interested"."""
        kept = " ".join(s for s in _SENTENCE_END.split(self.description) if not _EXCLUSION.match(s))
        if not self.named:
            return kept
        return f"{self.name}. {kept}".strip()


@dataclass(frozen=True)
class Agenda:
    topics: tuple[Topic, ...]
    path: str = ""

    @property
    def positive(self) -> tuple[Topic, ...]:
        return tuple(t for t in self.topics if not t.negative)

    def warnings(self) -> list[str]:
        """What parses but will not rank well: a title alone, topics without a description."""
        out: list[str] = []
        named = [t for t in self.topics if not t.negative]
        if len(self.topics) == 1 and not self.topics[0].description:
            out.append(
                f"{self.path}: the agenda is its title alone ({self.topics[0].name!r}): write a '## Topic' "
                "heading per research interest with a few sentences each (triage init writes a starter)"
            )
        else:
            for t in named:
                if not t.description:
                    out.append(
                        f"{self.path}:{t.line}: topic {t.name!r} has no description: it is matched by "
                        "its name alone; a few sentences under the heading rank far better"
                    )
        if len(self.topics) == 1 and self.topics[0].description and not self.topics[0].named:
            out.append(
                f"{self.path}: no '## Topic' headings: the whole file is one topic (fine for one interest; "
                "a heading per interest gives a score per interest)"
            )
        return out

    @property
    def negative(self) -> Topic | None:
        return next((t for t in self.topics if t.negative), None)

    @property
    def hash(self) -> str:
        """Changes whenever a topic's name, description or polarity changes."""
        canon = "\n".join(f"{t.negative}|{t.name}|{t.description}" for t in self.topics)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def _strip_comments(text: str) -> str:
    # Keep line numbers: replace each comment by as many newlines as it spans.
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def parse_agenda(text: str, path: str = "agenda.md") -> Agenda:
    """Parse agenda Markdown; raises ConfigError (with file and line) when it is unusable."""
    lines = _strip_comments(text).splitlines()
    title: str | None = None
    sections: list[tuple[str, int, list[str]]] = []
    preamble: list[str] = []
    for number, line in enumerate(lines, start=1):
        m = _HEADING.match(line)
        if m and len(m.group(1)) == 1 and not sections and title is None:
            title = m.group(2)
            continue
        if m and len(m.group(1)) == 2:
            name = m.group(2).strip()
            if not name:
                raise ConfigError(f"{path}:{number}: a '##' heading needs a topic name")
            sections.append((name, number, []))
            continue
        (sections[-1][2] if sections else preamble).append(line)

    def body(chunk: list[str]) -> str:
        return " ".join(" ".join(chunk).split())

    if not sections:
        description = body(preamble)
        if not description and not title:
            raise ConfigError(
                f"{path}: the agenda is empty; write a '## Topic' heading per research interest "
                "with a few sentences describing it (triage init writes a starter)"
            )
        return Agenda((Topic(title or "Agenda", description, line=1, named=title is not None),), path)

    topics: list[Topic] = []
    seen: dict[str, int] = {}
    for name, number, chunk in sections:
        key = name.casefold()
        if key in seen:
            raise ConfigError(f"{path}:{number}: topic '{name}' already appears on line {seen[key]}")
        seen[key] = number
        negative = excludes(name)
        # "Not interested" is a label; what it is about is its description alone.
        topics.append(Topic(name, body(chunk), negative=negative, line=number, named=not negative))
    if not any(not t.negative for t in topics):
        raise ConfigError(f"{path}: the agenda has only a 'Not interested' topic; add a topic you care about")
    return Agenda(tuple(topics), path)


def load_agenda(path: Path) -> Agenda:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(
            f"no agenda at {path}: run 'triage init' to write a starter agenda, or pass --agenda FILE"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the agenda {path}: {exc}") from None
    return parse_agenda(text, str(path))


def example_agenda_text() -> str:
    """The bundled example agenda (also the starter `triage init` writes)."""
    return (resources.files("assistant") / "data" / "example_agenda.md").read_text(encoding="utf-8")
