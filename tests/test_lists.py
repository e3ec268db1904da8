"""`triage list`: reading lists as a user drives them, on an embedded store and a Chroma server."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import Settings
from assistant.lists import ReadingLists
from assistant.store import Store
from conftest import write_lines

runner = CliRunner()
IDS = [f"arxiv:2401.0000{n}" for n in range(1, 5)]
TITLES = [
    "Adapters for everyone",
    "Routing in mixtures of experts",
    "Low-resource parsing",
    "Unrelated paper",
]


def env_for(settings: Settings) -> dict[str, str]:
    env = {"COLUMNS": "160", "TRIAGE_STORE": str(settings.store), "TRIAGE_COLLECTION": settings.collection}
    if settings.chroma_url:
        env["TRIAGE_CHROMA_URL"] = settings.chroma_url
    return env


def run(env: dict[str, str], *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=env, input=stdin)


def ok(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    result = run(env, *args, stdin=stdin)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def fail(env: dict[str, str], *args: str) -> str:
    result = run(env, *args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def load_papers(env: dict[str, str], tmp_path: Path) -> None:
    records = [
        json.dumps({"title": t, "arxiv_id": i.split(":")[1]}) for t, i in zip(TITLES, IDS, strict=True)
    ]
    ok(env, "ingest", str(write_lines(tmp_path / "papers.jsonl", records)))


def shown_ids(env: dict[str, str], name: str) -> list[str]:
    result = run(env, "list", "show", name, "--json")
    assert result.exit_code == 0, result.output
    return sorted(json.loads(line)["paper"]["id"] for line in result.stdout.splitlines())


def test_lists_from_creation_to_deletion(tmp_path: Path, settings: Settings) -> None:
    env = env_for(settings)
    load_papers(env, tmp_path)
    assert "No reading lists yet" in ok(env, "list", "ls")
    assert "Created the reading list 'Reading group'" in ok(
        env, "list", "create", "Reading group", "-d", "Thursday papers"
    )
    assert "already exists" in fail(env, "list", "create", "  Reading   group ")
    ok(env, "list", "create", "Ideas")
    assert "Added 2 papers to 'Reading group'" in ok(env, "list", "add", "Reading group", IDS[0], IDS[1])
    assert "Added 1 paper to 'Reading group' (1 already in it)" in ok(
        env, "list", "add", "Reading group", IDS[1], IDS[2]
    )
    ok(env, "list", "add", " Ideas ", IDS[0])  # a paper in two lists; names are matched as created
    listing = ok(env, "list", "ls")
    assert re.search(r"Ideas │ 1 │", listing) and re.search(r"Reading group │ 3 │ Thursday papers", listing)
    shown = ok(env, "list", "show", "Reading group")
    assert "Thursday papers" in shown and "Reading group: 3 papers" in shown
    assert all(t in shown for t in TITLES[:3]) and TITLES[3] not in shown
    assert "Removed 1 paper from 'Reading group' (1 were not in it)" in ok(
        env, "list", "rm", "Reading group", IDS[2], IDS[3]
    )
    assert shown_ids(env, "Reading group") == IDS[:2]
    assert "Renamed 'Reading group' to 'Journal club'" in ok(
        env, "list", "rename", "Reading group", "Journal club"
    )
    assert "no reading list named 'Reading group' (lists: Ideas, Journal club)" in fail(
        env, "list", "show", "Reading group"
    )
    assert shown_ids(env, "Journal club") == IDS[:2]
    ok(env, "list", "describe", "Journal club", "Weekly, Fridays")
    assert "Weekly, Fridays" in ok(env, "list", "ls")
    assert "a reading list named 'Ideas' already exists" in fail(
        env, "list", "rename", "Journal club", "Ideas"
    )
    assert "its 2 papers stay in the store" in ok(env, "list", "delete", "Journal club")
    assert re.search(r"papers\s+│\s+4 ", ok(env, "stats"))  # deleting a list deletes no paper
    assert shown_ids(env, "Ideas") == [IDS[0]]  # and leaves the paper's other lists alone
    store = Store.open(settings)
    assert [rl.name for rl in ReadingLists(store).all()] == ["Ideas"]  # kept in Chroma, beside the papers
    item = store.get(IDS[0])
    assert item is not None and item.decision.lists == ["Ideas"]


def test_list_mistakes_are_one_line_errors(tmp_path: Path, embedded_settings: Settings) -> None:
    env = env_for(embedded_settings)
    load_papers(env, tmp_path)
    ok(env, "list", "create", "Ideas")
    assert "no reading list named 'Nope' (lists: Ideas); 'triage list create' makes one" in fail(
        env, "list", "add", "Nope", IDS[0]
    )
    assert "no paper with id 'arxiv:9999.99999' in the store" in fail(
        env, "list", "add", "Ideas", "arxiv:9999.99999"
    )
    assert shown_ids(env, "Ideas") == []  # nothing was added when one id was wrong
    assert "a reading list needs a name" in fail(env, "list", "create", "   ")
    assert "at most 80" in fail(env, "list", "create", "x" * 81)
    assert "The list 'Ideas' is empty" in ok(env, "list", "show", "Ideas")


def test_add_reads_ids_from_stdin(tmp_path: Path, embedded_settings: Settings) -> None:
    env = env_for(embedded_settings)
    load_papers(env, tmp_path)
    ok(env, "list", "create", "Ideas")
    ok(env, "list", "create", "Copy")
    ok(env, "list", "add", "Ideas", "-", stdin=f"{IDS[0]}\n\n{IDS[3]}\n")
    assert shown_ids(env, "Ideas") == [IDS[0], IDS[3]]
    # `triage list show --json` (and `triage ranked --json`) lines pipe into another list.
    piped = run(env, "list", "show", "Ideas", "--json").stdout
    assert "Added 2 papers" in ok(env, "list", "add", "Copy", "-", stdin=piped)
    assert "Added 1 paper" in ok(env, "list", "add", "--create", "New one", IDS[1])
    assert shown_ids(env, "New one") == [IDS[1]]


def test_help_names_every_list_command() -> None:
    result = runner.invoke(app, ["list", "--help"])
    assert result.exit_code == 0
    for command in ("create", "ls", "show", "add", "rm", "rename", "describe", "delete"):
        assert command in result.output
    top = runner.invoke(app, ["--help"]).output
    assert all(c in top for c in ("list", "export", "digest"))
