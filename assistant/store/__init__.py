"""The paper store: the only package that talks to Chroma.

One collection of papers (document = title + abstract, embedded by the configured embedder);
the paper's fields, the researcher's decision and the latest assessment live in its metadata.
A second small collection holds what is not per paper (named records, store-wide values).

`Store` is composed of one part per responsibility, each in its own module:

- `connection`: opening (embedded or a server), the collections, the writer lock, Chroma's
  errors in words (`Connection`, which every other part builds on)
- `reads`: every read: by id, page by page, search and neighbours, counts, lookups
- `records`: the meta collection: named records and store-wide key-values
- `annotations`: assessments, decisions, list memberships, other per-paper values
- `papers`: upsert with merging, absorb, split, delete and restore, embedding
- `schema`: the stored form (metadata keys and conversions to and from the models)
- `merges`: the merge log that `split` undoes merges with
- `mirror` (its file: `layout`; its filters: `filters`; its vectors as a matrix: `vectors`) and
  `pending`: the copy of an embedded store the daily loop reads, and its queue of small writes
- `derived`, `queries`: what is worked out from the mirror and kept between commands

Other modules import from here, never from the parts.
"""

from __future__ import annotations

from typing import Any, Self

from assistant.config import Settings
from assistant.store.annotations import Annotations
from assistant.store.connection import META_COLLECTION_SUFFIX, SERVER_TIMEOUT
from assistant.store.merges import MERGES_KEPT
from assistant.store.papers import PaperRecord, Papers, UpsertReport
from assistant.store.reads import PAGE_SIZE, SearchHit
from assistant.store.schema import (
    BLOCK_WORDS,
    LEGACY_LIST_TABLE,
    LEGACY_LISTS,
    LIST_KEY_PREFIX,
    LIST_RECORD,
    Where,
    assessment_metadata,
    decision_metadata,
    list_key,
    list_names,
    paper_metadata,
    title_keys,
)
from assistant.store.schema import _paper_from as _paper_from  # for tests of the stored form

__all__ = [
    "BLOCK_WORDS",
    "LEGACY_LISTS",
    "LEGACY_LIST_TABLE",
    "LIST_KEY_PREFIX",
    "LIST_RECORD",
    "MERGES_KEPT",
    "META_COLLECTION_SUFFIX",
    "PAGE_SIZE",
    "SERVER_TIMEOUT",
    "PaperRecord",
    "SearchHit",
    "Store",
    "UpsertReport",
    "Where",
    "assessment_metadata",
    "decision_metadata",
    "list_key",
    "list_names",
    "paper_metadata",
    "title_keys",
]


def agenda_hash(settings: Settings) -> str | None:
    """The hash of the agenda the settings name (None when there is none to read: assessments
    then go to the store's plain keys)."""
    from assistant.agenda import load_agenda
    from assistant.errors import ConfigError

    try:
        return load_agenda(settings.agenda_path).hash
    except ConfigError:
        return None


class Store(Papers, Annotations):
    """Papers in Chroma: upsert with merging, paged reads, semantic search, metadata updates."""

    @classmethod
    def open(cls, settings: Settings, embedder: Any | None = None) -> Self:
        """Open (creating if needed) the store the settings point at."""
        store = super().open(settings, embedder)
        store._convert_lists()  # a store made before per-list keys is brought up to date
        store.join(settings.person, agenda_hash(settings))
        return store
