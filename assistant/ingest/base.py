"""What every importer returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from assistant.errors import InputError
from assistant.models import Paper


@dataclass
class ParseResult:
    """The papers read from one file, and the records that could not be read (with where)."""

    papers: list[Paper] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    records: int = 0
