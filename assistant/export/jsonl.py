"""JSON Lines: everything the store holds about each paper, one object a line.

Each line is a stored paper as `triage ranked --json` prints it (`paper`, `decision`,
`assessment`, `added_at`, `failure`) plus `lists`: the name and description of every reading
list the paper is in. `triage ingest` of such a file restores all of it (assistant.ingest.restore).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assistant.export.common import ExportContext
from assistant.models import StoredPaper


def record(item: StoredPaper, context: ExportContext) -> dict[str, Any]:
    data = item.model_dump(mode="json")
    data["lists"] = {name: context.lists.get(name, "") for name in item.decision.lists}
    return data


def dumps(data: Any) -> str:
    """One line of JSON, UTF-8 kept; the characters some readers take for line breaks are escaped."""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    return "".join(dumps(record(i, context)) + "\n" for i in items)
