"""Prompt templates: files in `prompts/`, versioned by content hash, overridable by the user.

A template names its inputs as `{placeholder}`. A user's override directory may replace any
template, but each replacement must use exactly the placeholders of the default, which is
checked when the templates load.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.errors import ConfigError

TEMPLATES = ("system.md", "assess.md")
# Used only when asked for (`triage tag --examples K`); not part of every assessment's key.
OPTIONAL = ("examples.md",)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def default_dir() -> Path:
    """The shipped templates: inside the installed package, or `prompts/` of a checkout."""
    packaged = Path(str(resources.files("assistant") / "prompts"))
    if (packaged / TEMPLATES[0]).is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "prompts"


def placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


@dataclass(frozen=True)
class Prompts:
    system: str
    assess: str
    source: str
    examples: str = ""

    @property
    def hash(self) -> str:
        return hashlib.sha256(f"{self.system}\x1f{self.assess}".encode()).hexdigest()[:16]

    def render_assess(self, **values: str) -> str:
        """Fill the assess template; values are inserted verbatim (never formatted again)."""
        return _fill(self.assess, values)

    def render_examples(self, examples: str) -> str:
        return _fill(self.examples, {"examples": examples})


def _fill(template: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def load_prompts(override: Path | None = None) -> Prompts:
    base = default_dir()
    texts: dict[str, str] = {}
    for name in (*TEMPLATES, *OPTIONAL):
        default_path = base / name
        if not default_path.is_file():
            raise ConfigError(
                f"the shipped prompt template {default_path} is missing; reinstall paper-triage"
            )
        default = default_path.read_text(encoding="utf-8")
        texts[name] = default
        if override is None:
            continue
        if not override.is_dir():
            raise ConfigError(f"prompt directory {override} does not exist")
        user_path = override / name
        if not user_path.is_file():
            continue
        try:
            user = user_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read prompt template {user_path}: {exc}") from None
        expected, found = placeholders(default), placeholders(user)
        if expected != found:
            missing = ", ".join(f"{{{p}}}" for p in sorted(expected - found)) or "none"
            unknown = ", ".join(f"{{{p}}}" for p in sorted(found - expected)) or "none"
            raise ConfigError(
                f"{user_path}: placeholders must match the default template "
                f"(missing: {missing}; unknown: {unknown})"
            )
        texts[name] = user
    return Prompts(texts["system.md"], texts["assess.md"], str(override or base), texts["examples.md"])
