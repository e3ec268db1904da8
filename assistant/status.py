"""A paper's decision status.

Apart from `models` so that the command line can offer the statuses as choices (`--status`)
without loading pydantic and the models when it only prints its help.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    NEW = "new"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MAYBE = "maybe"
