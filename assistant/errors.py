"""The project's own error types: every user mistake surfaces as one of these."""

from __future__ import annotations

from pathlib import Path


class TriageError(Exception):
    """An error the user can act on; the CLI prints it without a traceback."""


class ConfigError(TriageError):
    """A setting, config file or agenda is wrong."""


class StoreError(TriageError):
    """The store cannot be opened or written."""


class InputError(TriageError):
    """A malformed input record, with where it is: file, line and/or record number."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        record: int | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.record = record
        super().__init__(self.location_text() + message)

    def location_text(self) -> str:
        """`file:line (record N): `, leaving out whatever is unknown."""
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}" if where else f"line {self.line}"
        if self.record is not None:
            where += f" (record {self.record})" if where else f"record {self.record}"
        return f"{where}: " if where else ""
