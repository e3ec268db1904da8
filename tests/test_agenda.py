from __future__ import annotations

from pathlib import Path

import pytest

from assistant.agenda import load_agenda, parse_agenda
from assistant.errors import ConfigError


def test_headings_are_topics_and_not_interested_is_negative() -> None:
    agenda = parse_agenda(
        "# My agenda\n<!-- a comment\nspanning lines -->\nintro text\n\n## Adapters\nLoRA and\nfriends.\n\n"
        "## Not interested\nVision.\n"
    )
    assert [(t.name, t.description, t.negative) for t in agenda.topics] == [
        ("Adapters", "LoRA and friends.", False),
        ("Not interested", "Vision.", True),
    ]
    assert agenda.topics[0].line == 6


def test_headless_file_is_one_topic() -> None:
    agenda = parse_agenda("Efficient inference for small language models.\n")
    assert len(agenda.topics) == 1
    assert agenda.topics[0].description == "Efficient inference for small language models."
    # The placeholder name is a label: it takes no part in matching ("agenda" is no research term).
    assert agenda.topics[0].text == "Efficient inference for small language models."
    # A sentence that excludes something is not matched as interest.
    text = "## Speech\nSpeech recognition for dialects. Not hate speech detection.\n"
    speech = parse_agenda(text).topics[0]
    assert speech.text == "Speech. Speech recognition for dialects."
    assert "Not hate speech" in speech.description  # still shown and sent to an LLM as written
    titled = parse_agenda("# Inference\nSmall models.\n").topics[0]
    assert titled.name == "Inference" and titled.text == "Inference. Small models."


def test_editing_a_description_changes_the_hash() -> None:
    a = parse_agenda("## A\none\n")
    assert a.hash == parse_agenda("## A\n\none  \n").hash
    assert a.hash != parse_agenda("## A\ntwo\n").hash


@pytest.mark.parametrize("text", ["", "   \n", "<!-- only a comment -->\n"])
def test_empty_agenda_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="empty"):
        parse_agenda(text, "a.md")


def test_duplicate_topic_names_the_lines() -> None:
    with pytest.raises(ConfigError, match=r"a.md:3: topic 'x' already appears on line 1"):
        parse_agenda("## X\nd\n## x\nd\n", "a.md")


def test_only_not_interested_is_an_error() -> None:
    with pytest.raises(ConfigError, match="only a 'Not interested'"):
        parse_agenda("## Not interested\nvision\n")


def test_missing_agenda_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="triage init"):
        load_agenda(tmp_path / "nope.md")


def test_an_agenda_that_parses_but_will_rank_poorly_gets_warnings() -> None:
    assert parse_agenda("## Speech\nDialect ASR.\n\n## Vision\nSegmentation.\n").warnings() == []
    (title,) = parse_agenda("# My research\n", "a.md").warnings()
    assert "the agenda is its title alone ('My research')" in title
    (bare,) = parse_agenda("## Speech\nDialect ASR.\n\n## Vision\n", "a.md").warnings()
    assert bare.startswith("a.md:4: topic 'Vision' has no description")
    (one,) = parse_agenda("Papers on dialect speech recognition.\n", "a.md").warnings()
    assert "no '## Topic' headings" in one
