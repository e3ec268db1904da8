"""Settings: command-line flags, then environment, then an optional TOML config file."""

from __future__ import annotations

import getpass
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from assistant.defaults import default_config_path
from assistant.errors import ConfigError

PERSON_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


def check_person(name: str) -> str:
    """A person's name as given (`--user`, TRIAGE_USER), or a ConfigError saying what is wrong."""
    if not PERSON_NAME.fullmatch(name):
        raise ConfigError(
            f"the user name {name!r} cannot name a person: use letters, digits and . _ @ + - "
            "(up to 64, starting with a letter or digit)"
        )
    return name


def login_name() -> str:
    """The default person: the login name (`user` when the system gives none a name can use)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = os.environ.get("USER", "")
    return name if PERSON_NAME.fullmatch(name or "") else "user"


__all__ = ["Settings", "default_config_path", "load_settings"]


class Settings(BaseSettings):
    """Everything the tool can be configured with.

    Environment names: TRIAGE_STORE, TRIAGE_USER, TRIAGE_AGENDA, TRIAGE_CHROMA_URL, TRIAGE_CHROMA_TOKEN,
    TRIAGE_MODEL, TRIAGE_EMBEDDER, OPENAI_API_KEY, OPENAI_BASE_URL, S2_API_KEY, SMTP_PASSWORD, and
    TRIAGE_<FIELD> for the rest (TRIAGE_HF_URL, TRIAGE_S2_URL, ...). Config-file keys are the field names.
    """

    model_config = SettingsConfigDict(env_prefix="TRIAGE_", extra="ignore", populate_by_name=True)

    store: Path = Field(default=Path("store"), description="embedded Chroma store directory")
    chroma_url: str | None = Field(default=None, description="Chroma server URL")
    # A secret, so no flag (a command line is visible to every user of the machine) and never
    # shown: SecretStr prints as '**********'.
    chroma_token: SecretStr | None = Field(
        default=None, description="token the Chroma server's proxy asks for (docs/server.md)"
    )
    collection: str = Field(default="papers", description="Chroma collection of papers")
    user: str | None = Field(
        default=None, description="the person the commands act as (default: the login name)"
    )
    agenda: Path | None = Field(default=None, description="research agenda (Markdown)")
    model: str | None = Field(default=None, description="LLM model name")
    embedder: str = Field(default="minilm-int8", description="minilm-int8 or openai:<model>")
    arxiv_url: str = Field(default="https://export.arxiv.org/api/query", description="arXiv API endpoint")
    arxiv_delay: float = Field(default=3.0, ge=0, description="seconds between arXiv API requests")
    hf_url: str = Field(
        default="https://huggingface.co/api/daily_papers", description="Hugging Face daily papers API"
    )
    hf_delay: float = Field(default=1.0, ge=0, description="seconds between Hugging Face API requests")
    s2_url: str = Field(default="https://api.semanticscholar.org", description="Semantic Scholar API base")
    s2_delay: float = Field(default=1.0, ge=0, description="seconds between Semantic Scholar requests")
    s2_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("s2_api_key", "S2_API_KEY")
    )
    rss_delay: float = Field(default=1.0, ge=0, description="seconds between requests to one RSS/Atom host")
    http_deadline: float = Field(
        default=30.0, gt=0, description="seconds one network request may take, retries and waits included"
    )
    http_max_mb: float = Field(
        default=50.0, gt=0, description="largest answer (MB, once decompressed) read from a provider"
    )
    smtp_host: str | None = Field(default=None, description="SMTP server that sends the daily digest")
    smtp_port: int = Field(default=587, description="SMTP port (587: STARTTLS, 465: TLS, 25: plain)")
    smtp_user: str | None = Field(default=None, description="SMTP login")
    smtp_password: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("smtp_password", "SMTP_PASSWORD")
    )
    digest_from: str | None = Field(default=None, description="From: address of the e-mailed digest")
    digest_to: list[str] = Field(default_factory=list, description="addresses the daily digest is sent to")
    prompts: Path | None = Field(default=None, description="directory overriding the prompt templates")
    examples: int = Field(
        default=0, ge=0, le=50, description="decided papers shown to the LLM as calibration examples"
    )
    prices: dict[str, list[float]] = Field(
        default_factory=dict, description="model -> [input, output] USD per million tokens"
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("openai_api_key", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("openai_base_url", "OPENAI_BASE_URL")
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    @property
    def agenda_path(self) -> Path:
        """The agenda file: as set, else `agenda.md` beside the store."""
        return self.agenda if self.agenda is not None else self.store.parent / "agenda.md"

    @property
    def person(self) -> str:
        """The person the commands act as: `user` as set, else the login name."""
        return check_person(self.user) if self.user else login_name()

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_api_key or self.openai_base_url)

    @property
    def store_location(self) -> str:
        return self.chroma_url or str(self.store)

    @property
    def local_store(self) -> Path | None:
        """The embedded store's directory (None with a Chroma server)."""
        return None if self.chroma_url else self.store

    @property
    def store_exists(self) -> bool:
        """Whether there is a store to read (a server's is taken to be there)."""
        return self.local_store is None or (self.local_store / "chroma.sqlite3").is_file()


def load_settings(config_file: Path | None = None, **flags: Any) -> Settings:
    """Settings with flags over environment over config file; None flags are left unset."""
    path = config_file or (Path(os.environ["TRIAGE_CONFIG"]) if os.environ.get("TRIAGE_CONFIG") else None)
    if path is not None and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    path = path or default_config_path()
    toml_file = path if path.is_file() else None
    if toml_file is not None:
        try:
            tomllib.loads(toml_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{toml_file}: not a valid TOML config file: {exc}") from exc

    class _FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=toml_file)

    try:
        settings = _FileSettings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid settings: {problems}") from exc
    return settings
