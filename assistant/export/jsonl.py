"""JSON Lines: everything the store holds about each paper, one object a line.

Each line is a stored paper as `triage ranked --json` prints it (`paper`, `decision`,
`assessment`, `added_at`, `failure`) plus `lists`: the name and description of every reading
list the paper is in. `triage ingest` of such a file restores all of it (assistant.ingest.restore).

From a store several people use (`assistant.store.people`), each line also names whose the
decision is (`person`: the one who exported) and holds every other person's decision on the
paper with their lists, where they hold one:

    "person": "ana", "people": {"ben": {"decision": {...}, "lists": {"to read": ""}}},
    "shared_lists": {"reading group": {"description": "...", "created_by": "ana", "added_by": "ben"}}

and the lab's shared lists the paper is in (`shared_lists`, with who added it; not among the
exporter's own `lists`), so that the export restores everyone's decisions, each to its person,
and the shared lists as shared.

With vectors (`triage export -f jsonl --vectors`) each line also has `embedding`: the paper's
stored vector, so that restoring the file embeds nothing:

    "embedding": {"embedder": "paper-triage-minilm-int8 max_tokens=256", "dims": 384,
                  "document_sha256": "<first 16 hex digits>", "float32": "<base64>"}

`float32` is the vector's little-endian float32 bytes in base64: exactly what Chroma keeps, in
about 2 KB for 384 dimensions (a list of numbers with float32's 9 significant digits takes
about 5.5 KB, and more with every digit fewer it loses). `embedder` names the embedder that
made it (`Store.embedder_identity`) and `document_sha256` the text it was made of (title,
blank line, abstract): a restore takes the vector only into a store with the same embedder,
for the same text. Readers that do not know the key ignore it (older versions' restore reads
only the keys it knows).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assistant.export.common import ExportContext
from assistant.models import StoredPaper

VECTOR_KEY = "embedding"


@dataclass(frozen=True)
class Vectors:
    """The stored vectors an export carries: which embedder made them, and per paper id the
    document each is of and the vector as little-endian float32 bytes (`Store.vectors`)."""

    embedder: str
    by_id: Mapping[str, tuple[str, bytes]]


def document_sha256(text: str) -> str:
    """Names the text a vector is of: the first 16 hex digits of its UTF-8 sha256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def vector_field(embedder: str, document: str, data: bytes) -> dict[str, Any]:
    return {
        "embedder": embedder,
        "dims": len(data) // 4,
        "document_sha256": document_sha256(document),
        "float32": base64.b64encode(data).decode("ascii"),
    }


def record(item: StoredPaper, context: ExportContext, vectors: Vectors | None = None) -> dict[str, Any]:
    data = item.model_dump(mode="json")
    data["lists"] = {name: context.lists.get(name, "") for name in item.decision.lists}
    if context.person is not None:
        data["person"] = context.person
        shared = context.shared.get(item.paper.id, {})
        if shared:  # the lab's lists, apart from the exporter's own
            made = {name: context.shared_lists.get(name, ("", None)) for name in shared}
            data["shared_lists"] = {
                name: {"description": made[name][0], "created_by": made[name][1], "added_by": who or None}
                for name, who in sorted(shared.items())
            }
            data["lists"] = {n: d for n, d in data["lists"].items() if n not in shared}
            data["decision"]["lists"] = [n for n in data["decision"]["lists"] if n not in shared]
    others = context.others.get(item.paper.id)
    if others:
        data["people"] = {
            who: {
                "decision": decision.model_dump(mode="json"),
                "lists": {name: context.others_lists.get(who, {}).get(name, "") for name in decision.lists},
            }
            for who, decision in sorted(others.items())
        }
    stored = vectors.by_id.get(item.paper.id) if vectors is not None else None
    if vectors is not None and stored is not None:
        data[VECTOR_KEY] = vector_field(vectors.embedder, *stored)
    return data


def dumps(data: Any) -> str:
    """One line of JSON, UTF-8 kept; the characters some readers take for line breaks are escaped."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def write(items: Sequence[StoredPaper], context: ExportContext, vectors: Vectors | None = None) -> str:
    """The papers as full records; with `vectors`, each paper's stored vector too."""
    return "".join(dumps(record(i, context, vectors)) + "\n" for i in items)
