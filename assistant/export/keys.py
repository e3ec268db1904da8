"""Citation keys: first author's family name, year, first significant title word (`vaswani2017attention`).

Keys are ASCII letters and digits only. Papers whose keys would collide all get a suffix,
`a`, `b`, ... in the order of their paper ids, so the same papers always get the same keys.
"""

from __future__ import annotations

import itertools
import re
import string
import unicodedata
from collections.abc import Iterator, Sequence

from assistant.export.common import split_name
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


def base_key(paper: Paper) -> str:
    author = ascii_word(split_name(paper.authors[0]).last) if paper.authors else ""
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
    """Paper id -> a citation key unique among these papers."""
    candidates: dict[str, list[str]] = {}
    for paper in sorted(papers, key=lambda p: p.id):
        candidates.setdefault(base_key(paper), []).append(paper.id)
    keys = {ids[0]: key for key, ids in candidates.items() if len(ids) == 1}
    used = set(keys.values())
    for key, ids in candidates.items():
        if len(ids) == 1:
            continue
        suffixes = (s for s in _suffixes() if key + s not in used and key + s not in candidates)
        for pid, suffix in zip(ids, suffixes, strict=False):
            keys[pid] = key + suffix
            used.add(key + suffix)
    return keys
