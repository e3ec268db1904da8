"""What is not per paper, kept in the store's small second collection: named records (saved
feeds, their state, reading-list definitions) and store-wide key-values."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from assistant.store.connection import Connection


class Records(Connection):
    """Records of the meta collection: named records of a kind, and store-wide values by key."""

    # -- named records (saved feeds, their state, reading-list definitions) -----

    def named_records(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every record of a kind (`feed`, `feed-state`, LIST_RECORD for reading-list
        definitions) kept in the meta collection, by name: one record each, so writers of two
        never clash."""
        res = self.meta.get(where={"kind": kind}, include=["documents"])
        out = {}
        for doc in res["documents"] or []:
            value = json.loads(doc) if doc else None
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                out[value["name"]] = value
        return out

    def put_named_record(self, kind: str, value: dict[str, Any]) -> None:
        """Create or replace one named record (`value["name"]` names it)."""
        with self.write_lock():
            self.meta.upsert(
                ids=[self._named_record_id(kind, value["name"])],
                documents=[json.dumps(value, ensure_ascii=False)],
                metadatas=[{"kind": kind}],
                embeddings=[[0.0]],  # type: ignore[arg-type]
            )

    def delete_named_record(self, kind: str, name: str) -> None:
        with self.write_lock():
            self.meta.delete(ids=[self._named_record_id(kind, name)])

    @staticmethod
    def _named_record_id(kind: str, name: str) -> str:
        return f"{kind}:{hashlib.sha256(name.encode('utf-8')).hexdigest()[:32]}"

    # -- store-wide values ----------------------------------------------------

    def get_value(self, key: str) -> Any:
        res = self.meta.get(ids=[key], include=["documents"])
        docs = res["documents"] or []
        return json.loads(docs[0]) if docs and docs[0] else None

    def set_value(self, key: str, value: Any) -> None:
        with self.write_lock():
            self.meta.upsert(ids=[key], documents=[json.dumps(value)], embeddings=[[0.0]])  # type: ignore[arg-type]
