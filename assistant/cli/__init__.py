"""The `triage` command line.

`shared` holds the typer app, the global options and the per-run state; every other module is a
group of commands that registers itself on the app when this package imports it, in the order
`triage --help` lists them (papers in, the queue, assessing, review, exports, feeds, the
personal model, setup). Command modules import `shared` and, for a helper, each other;
`shared` imports none of them, and nothing but this package imports them all.

Each command imports the store, the engines, the personal model or the review UI when it runs:
`triage --help` loads none of them.
"""

from assistant.cli import papers, view, tag, review, export, feeds, lists, personal, check, start  # noqa: F401, I001
from assistant.cli.shared import app

__all__ = ["app", "entrypoint"]


def entrypoint() -> None:
    """The console script `triage`."""
    app()
