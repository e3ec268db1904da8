"""Defaults the command line's help names, in a module that imports nothing heavy.

`triage --help` shows them before any command runs, so they cannot live beside the code that
uses them (the settings, the LLM client, the personal model): importing those takes seconds.
Each of those modules imports its default from here.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP_NAME = "paper-triage"
DEFAULT_MODEL = "gpt-4o-mini"  # the LLM model when neither --model nor TRIAGE_MODEL names one
MATCH = 5  # a topic score that is a real match (0-10): what the digest lists
LOW_SCORE = 4  # every topic at most this: the agenda does not cover the paper (suggest-agenda)


def default_config_path() -> Path:
    """Where the optional config file is looked for when none is named."""
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
