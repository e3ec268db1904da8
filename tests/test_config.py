from __future__ import annotations

from pathlib import Path

import pytest

from assistant.config import default_config_path, load_settings
from assistant.errors import ConfigError


def test_flags_beat_environment_beat_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('store = "from-file"\nmodel = "file-model"\nchroma_url = "http://127.0.0.1:1"\n')
    monkeypatch.setenv("TRIAGE_MODEL", "env-model")
    s = load_settings(cfg)
    assert (str(s.store), s.model, s.chroma_url) == ("from-file", "env-model", "http://127.0.0.1:1")
    s = load_settings(cfg, model="flag-model", store=Path("flag-store"))
    assert (str(s.store), s.model) == ("flag-store", "flag-model")


def test_default_config_file_is_read_from_the_user_config_dir() -> None:
    path = default_config_path()
    path.parent.mkdir(parents=True)
    path.write_text('agenda = "topics.md"\n')
    assert load_settings().agenda_path == Path("topics.md")


def test_agenda_defaults_to_beside_the_store() -> None:
    assert load_settings(store=Path("data/store")).agenda_path == Path("data/agenda.md")


def test_openai_variables_are_read_and_the_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    s = load_settings()
    assert s.llm_configured and s.openai_base_url == "http://127.0.0.1:9/v1"
    assert "sk-secret-value" not in repr(s) and "sk-secret-value" not in str(s.model_dump())


def test_broken_config_file_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("store = [unclosed\n")
    with pytest.raises(ConfigError, match="not a valid TOML"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
