"""The web, below the importers and the feeds that use it: a polite HTTP client (a minimum delay
between requests to one provider, retries of 429 and 5xx with exponential backoff honouring
Retry-After (tenacity), a deadline and a size cap per request) and one-line errors.

One client per provider is shared by every feed of a run, so two arXiv feeds still make one
request every 3 seconds between them.

An error says what failed in one line a user can act on: the status and its reason, the
address (without its query, where private feeds keep their tokens) and, from a JSON API, its
message. An error page's HTML is never quoted: its markup would drown that line, in `triage
fetch` and in `feed ls` alike. A refused connection is not retried: nothing listens at the
address, and backing off for 15 s would not change that.

messages.py  what an answer says, in one line (addresses, sizes, waits, error bodies)
deadline.py  the request's deadline on every socket read and write
client.py    PoliteClient: delay, retries, deadline, size cap
jsonread.py  JSON read to a bound
"""

from assistant.web.client import PoliteClient
from assistant.web.jsonread import BoundedJson, json_of, read_json
from assistant.web.messages import (
    DEADLINE,
    MAX_BYTES,
    MB,
    FetchError,
    address,
    is_html,
    size_words,
    wait_words,
)

__all__ = [
    "DEADLINE",
    "MAX_BYTES",
    "MB",
    "BoundedJson",
    "FetchError",
    "PoliteClient",
    "address",
    "is_html",
    "json_of",
    "read_json",
    "size_words",
    "wait_words",
]
