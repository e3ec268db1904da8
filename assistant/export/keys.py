"""Citation keys: the source's own key, else first author's family name, year, first significant
title word (`vaswani2017attention`).

A paper imported from a reference manager keeps its key (the documents citing it use it),
when BibTeX can read it and no other paper of the export has it. Made keys are ASCII letters
and digits only; papers whose made keys would collide all get a suffix, `a`, `b`, ... in the
order of their paper ids, so the same papers always get the same keys.
"""

from __future__ import annotations

import itertools
import re
import string
import unicodedata
from collections.abc import Iterator, Sequence

from assistant.models import Paper

# Function words a key never starts its title part with (as Google Scholar and Better BibTeX do).
STOPWORDS = frozenset(
    "a an the on of in for to and or with from at by via into is are be do does did how what why "
    "when where which who can toward towards".split()
)
_FOLD = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th"})


def ascii_word(text: str) -> str:
    """Lowercase ASCII letters and digits only: accents dropped, `ß` -> `ss`."""
    text = unicodedata.normalize("NFKD", text.casefold().translate(_FOLD))
    return re.sub(r"[^a-z0-9]", "", text.encode("ascii", "ignore").decode("ascii"))


_SOURCE_KEY = re.compile(r"^[^\s,{}\"#%'()=\\~]{1,100}$")


def source_key(paper: Paper) -> str | None:
    """The key the paper had in the file it came from, if BibTeX, biber and CSL can all use it."""
    key = str(paper.extra.get("citekey") or "")
    return key if _SOURCE_KEY.match(key) else None


def base_key(paper: Paper) -> str:
    author = ascii_word(paper.people[0].last) if paper.authors else ""
    words = [ascii_word(w) for w in re.split(r"[\s\-–—/:]+", paper.title)]
    words = [w for w in words if w]
    word = next((w for w in words if w not in STOPWORDS), words[0] if words else "")
    key = f"{author or 'anon'}{paper.year or ''}{word}"
    return key if key[0].isalpha() else f"k{key}"


def _suffixes() -> Iterator[str]:
    for size in itertools.count(1):
        for letters in itertools.product(string.ascii_lowercase, repeat=size):
            yield "".join(letters)


def citation_keys(papers: Sequence[Paper]) -> dict[str, str]:
    """Paper id -> a citation key unique among these papers (keys differing only in case count
    as the same: biber folds them)."""
    return assign_keys([(p.id, source_key(p), base_key(p)) for p in papers])


def assign_keys(papers: Sequence[tuple[str, str | None, str]]) -> dict[str, str]:
    """`citation_keys` of papers given as (id, `source_key`, `base_key`)."""
    ordered = sorted(papers, key=lambda p: p[0])
    own: dict[str, list[tuple[str, str]]] = {}
    for pid, key, _ in ordered:
        if key:
            own.setdefault(key.casefold(), []).append((pid, key))
    keys = {group[0][0]: group[0][1] for group in own.values() if len(group) == 1}
    used = {k.casefold() for k in keys.values()}
    candidates: dict[str, list[str]] = {}
    for pid, _, base in ordered:
        if pid not in keys:
            candidates.setdefault(base, []).append(pid)
    for key, ids in candidates.items():
        if len(ids) == 1 and key not in used:
            keys[ids[0]] = key
            used.add(key)
    for key, ids in candidates.items():
        if ids[0] in keys:
            continue
        suffixes = (s for s in _suffixes() if key + s not in used and key + s not in candidates)
        for pid, suffix in zip(ids, suffixes, strict=False):
            keys[pid] = key + suffix
            used.add(key + suffix)
    return keys


_ALIAS = re.compile(r"^[^\s,{}\"#%'()=\\~]{1,100}$")  # a key biber, BibTeX and CSL all read


def assign_aliases(papers: Sequence[tuple[str, Sequence[str]]], keys: dict[str, str]) -> dict[str, list[str]]:
    """`aliases` of papers given as (id, `alias_candidates`), in the export's order."""
    taken = {k.casefold() for k in keys.values()}
    out: dict[str, list[str]] = {}
    for pid, candidates in papers:
        mine = []
        for alias in candidates:
            if _ALIAS.match(alias) and alias.casefold() not in taken:
                taken.add(alias.casefold())
                mine.append(alias)
        if mine:
            out[pid] = mine
    return out
