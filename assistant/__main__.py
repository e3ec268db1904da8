"""`python -m assistant` runs the triage command line."""

from assistant.cli import entrypoint

entrypoint()
