"""Paper Triage Assistant: rank papers against a research agenda, review them, export lists."""

__version__ = "0.1.0"
