"""`triage ingest`, `rm` and `split`: papers into the store, and out of it again."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from assistant.cli.shared import app, console, err_console, plural, progress, read_ids, state, user_errors
from assistant.errors import TriageError
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.ingest import FileReport
    from assistant.models import StoredPaper
    from assistant.store import Store

# The names `--format` takes: the keys of `assistant.ingest.PARSERS` (a test holds them equal),
# spelled out here so that `--help` does not load the parsers.
INGEST_FORMATS = ("json", "jsonl", "csl-json", "bibtex", "ris", "csv", "arxiv", "listing")
NOTES_SHOWN = 10


def run_ingest(paths: list[Path], fmt: str | None) -> list[FileReport]:
    """Import files with a progress bar; print the per-file table and every skipped record."""
    from assistant.ingest import ingest_files

    with progress() as bar:
        task = bar.add_task("importing", total=None)

        def parsed(path: Path, n: int) -> None:
            bar.update(task, description=f"importing {path.name}", total=n, completed=0)

        reports = ingest_files(  # the store is opened (or made) once a file has papers to store
            lambda: state.store, paths, fmt, on_progress=lambda n: bar.advance(task, n), on_parsed=parsed
        )
    print_ingest(reports)
    return reports


def print_ingest(reports: list[FileReport]) -> None:
    from assistant.render import ingest_table

    console.print(ingest_table(reports))
    for report in reports:
        if report.error:
            err_console.print(f"[red]error:[/red] {escape(str(report.error))}")
        for problem in report.skipped:
            err_console.print(f"[yellow]skipped:[/yellow] {escape(str(problem))}")
        for note in report.notes[:NOTES_SHOWN]:
            err_console.print(f"[yellow]note:[/yellow] {escape(note)}")
        if len(report.notes) > NOTES_SHOWN:
            more = len(report.notes) - NOTES_SHOWN
            err_console.print(f"[yellow]note:[/yellow] and {more} more notes on {report.path}")


@app.command()
@user_errors
def ingest(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Files: JSON/JSONL, BibTeX, RIS, CSL-JSON, CSV, arXiv Atom XML, or a copied listing page.",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str | None, typer.Option("--format", "-f", help=f"Force the format: {', '.join(INGEST_FORMATS)}.")
    ] = None,
    arxiv: Annotated[
        str | None, typer.Option("--arxiv", help='Query the arXiv API, e.g. "cat:cs.CL AND ti:adapter".')
    ] = None,
    arxiv_id: Annotated[
        list[str] | None, typer.Option("--arxiv-id", help="Fetch these arXiv ids (repeat the option).")
    ] = None,
    maximum: Annotated[int, typer.Option("--max", min=1, help="At most this many arXiv results.")] = 100,
    accept: Annotated[
        bool,
        typer.Option(
            "--accept",
            help="Mark every imported paper accepted: a reference manager's library (Zotero, a .bib) "
            "becomes the personal model's starting profile.",
        ),
    ] = False,
    list_name: Annotated[
        str | None,
        typer.Option("--list", "-l", help="File every imported paper into this reading list (made if new)."),
    ] = None,
    enrich: Annotated[
        bool,
        typer.Option(
            "--enrich",
            help="Fill in missing abstracts (and authors, venue, year, DOI) of the imported papers "
            "from Semantic Scholar and arXiv, as 'triage enrich' does.",
        ),
    ] = False,
) -> None:
    """Import papers into the store; each work is kept once (same arXiv id, DOI, or title unless
    key, type or year say they are two works).

    Guide: docs/formats.md"""
    from assistant.ingest import ingest_arxiv, record_import
    from assistant.ingest.arxiv import ArxivClient

    if not files and not arxiv and not arxiv_id:
        raise TriageError("nothing to import: name files, or use --arxiv QUERY / --arxiv-id ID")
    # Mistakes in the command line are reported before the store is opened (or made).
    if format is not None and format.lower() not in INGEST_FORMATS:
        raise TriageError(f"unknown format {format!r} for --format; known: {', '.join(INGEST_FORMATS)}")
    missing = [str(f) for f in files or [] if not f.exists()]
    if files and len(missing) == len(files) and not (arxiv or arxiv_id):
        raise TriageError(f"no such file: {', '.join(missing)}")
    reports = run_ingest(files or [], format.lower() if format else None) if files else []
    if arxiv or arxiv_id:
        settings = state.settings
        client = ArxivClient.from_settings(settings)
        with progress() as bar:
            task = bar.add_task("querying arXiv", total=None)
            report = ingest_arxiv(
                state.store,
                client,
                arxiv,
                arxiv_id,
                maximum if arxiv else max(maximum, len(arxiv_id or [])),
                on_progress=lambda n: bar.advance(task, n),
            )
        print_ingest([report])
        reports.append(report)
    if any(r.error is None for r in reports):  # files that all failed to parse made no store
        record_import(state.store, reports, list_name)
    imported = list(dict.fromkeys(pid for r in reports for pid in r.ids))
    enrich_failed = False
    if imported and enrich:
        from assistant.cli.feeds import run_enrich

        enrich_failed = bool(run_enrich("abstract", imported, titles=True, retry=False).errors)
    if imported and accept:
        # Your own decisions stand: only papers still undecided take the library's accept.
        decided = {i.paper.id: i.decision.status for i in state.store.get_many(imported)}
        undecided = [pid for pid in imported if decided.get(pid, Status.NEW) is Status.NEW]
        kept = [pid for pid in imported if pid not in undecided and decided.get(pid) is not Status.ACCEPTED]
        if undecided:
            state.store.set_status(undecided, Status.ACCEPTED, seed=True)
        console.print(
            f"Marked {plural(len(undecided), 'paper')} accepted: the personal model learns from them "
            "('triage ranked' and 'triage review' show the queue it makes)."
        )
        if kept:
            err_console.print(
                f"[yellow]note:[/yellow] {plural(len(kept), 'paper')} you had already decided otherwise "
                f"kept your decision ({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''}); "
                "'triage mark ID --accept' changes it"
            )
    if imported and list_name:
        from assistant.lists import ReadingLists

        lists = ReadingLists(state.store)
        chosen = lists.create(list_name, exist_ok=True)
        added = lists.add(chosen.name, imported)
        console.print(f"Filed {plural(added, 'paper')} into the reading list {escape(chosen.name)!r}.")
    new = sum(r.new for r in reports)
    if imported:
        state.rank_in_background()
    if new:
        them = "it" if new == 1 else "them"
        err_console.print(
            f"[dim]{plural(new, 'new paper')}: 'triage tag' assesses {them} for the queue.[/dim]"
        )
    if enrich_failed or any(not r.ok for r in reports):
        raise typer.Exit(1)


@app.command()
@user_errors
def rm(
    ids: Annotated[
        list[str] | None,
        typer.Argument(help="Paper ids ('-' reads ids or JSON lines from stdin).", show_default=False),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Papers that came only from this file (its name, as 'triage show' lists sources).",
        ),
    ] = None,
    last: Annotated[bool, typer.Option("--last-import", help="The papers the last import made.")] = False,
    including_decided: Annotated[
        bool,
        typer.Option(
            "--including-decided",
            help="With --last-import: delete its papers you decided on, starred, noted or listed too.",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before deleting.")] = False,
) -> None:
    """Delete papers from the store, with their decisions, notes and assessments.

    Undo a wrong import with --last-import (only the papers it made, and of those only the ones
    you have not decided on, starred, noted or listed; papers it merged into were there before
    and stay, without its source), or name the file with --source. What is deleted is written
    to a file first: 'triage ingest FILE' brings it back whole.

    Guide: docs/formats.md"""
    from assistant.ingest import import_lists, last_import, save_removed, undo_last_import, was_undone

    store = state.store
    chosen: list[str] = []
    spared: list[str] = []  # papers of the last import that carry the researcher's own
    kept_elsewhere = 0
    asked = read_ids(ids) if ids else []  # read once: "-" reads the ids from standard input
    chosen += asked
    if source:
        name = Path(source).name
        for pid, meta in store.iter_metadata():
            sources = [str(x) for x in meta.get("sources") or ()]
            mine = [x for x in sources if x.split(":", 1)[-1] == name or x == source]
            if mine and len(mine) == len(sources):
                chosen.append(pid)
            elif mine:
                kept_elsewhere += 1
    if last:
        found = last_import(store)
        if found is None:
            raise TriageError(
                "no import is recorded in this store (imports record what they made since this version)"
            )
        made, files, when = found
        what = f"the last import ({', '.join(Path(f).name for f in files) or 'no file'}, {_when(when)})"
        if was_undone(store):
            raise TriageError(f"{what} was undone already: nothing to delete")
        if not made:
            unsourced = undo_last_import(store)
            if not unsourced:
                raise TriageError(
                    f"{what} made no new papers (it merged into papers already there): nothing to delete"
                )
            raise TriageError(
                f"{what} made no new papers (it merged into papers already there): nothing to delete; "
                f"the {plural(unsourced, 'paper')} it merged into no longer list its file among their sources"
            )
        console.print(f"{what[0].upper()}{what[1:]} made {plural(len(made), 'paper')}.")
        if not including_decided:
            seeded = {pid for pid, meta in store.metadata(made) if meta.get("seed")}
            given = import_lists(store)
            theirs = _others_on(store, made)
            spared = [
                i.paper.id
                for i in store.get_many(made)
                if _carries_yours(i, seeded=i.paper.id in seeded, given=given) or i.paper.id in theirs
            ]
            made = [pid for pid in made if pid not in set(spared)]
            if spared:
                console.print(
                    f"[yellow]kept {plural(len(spared), 'paper')} you decided on, noted or listed"
                    + (f" (or others sharing the store did: {len(theirs)})" if theirs else "")
                    + "; --including-decided removes them too[/yellow]"
                )
        chosen += made
    if not (ids or source or last):
        raise TriageError("nothing to delete: give paper ids, --source FILE or --last-import")
    items = store.get_many(list(dict.fromkeys(chosen)))
    present = {i.paper.id for i in items}
    unknown = [pid for pid in asked if pid not in present]
    if unknown:
        err_console.print(
            f"[yellow]Not in the store: {escape(', '.join(unknown[:5]))}"
            f"{f' and {len(unknown) - 5} more' if len(unknown) > 5 else ''}.[/yellow]"
        )
    if not items and last and spared:
        unsourced = undo_last_import(store, kept=spared)  # the sources it gave papers go
        merged = f"; {plural(unsourced, 'paper')} it merged into lost its source" if unsourced else ""
        console.print(f"Nothing deleted: every paper it made is one of yours{merged}.")
        return
    if not items:
        raise TriageError(
            f"no paper came only from {source}: nothing deleted"
            if source and not ids and not last
            else "no such papers in the store: nothing deleted"
        )
    decided = [i for i in items if _carries_yours(i)]
    console.print(f"{plural(len(items), 'paper')} to delete:")
    for item in items[:5]:
        console.print(f"  {escape(item.paper.id)}  {escape(item.paper.title[:90])}")
    if len(items) > 5:
        console.print(f"  ... and {len(items) - 5} more")
    if decided:
        console.print(
            f"[yellow]{plural(len(decided), 'paper')} of these carry your decision, note or lists.[/yellow]"
        )
    others = _others_on(store, [i.paper.id for i in items])
    if others:
        names = ", ".join(sorted({n for found in others.values() for n in found}))
        console.print(
            f"[yellow]{plural(len(others), 'paper')} of these carry other people's decisions "
            f"({escape(names)}): deleting removes them for everyone, and the saved copy holds only "
            "yours.[/yellow]"
        )
    if kept_elsewhere:
        console.print(
            f"[dim]{plural(kept_elsewhere, 'paper')} from {escape(source or '')} also came from "
            "other sources: kept.[/dim]"
        )
    if not yes:
        if not sys.stdin.isatty():
            raise TriageError("deleting needs confirmation: run it in a terminal, or add --yes")
        if not typer.confirm("Delete them?", default=False):
            console.print("Nothing deleted.")
            return
    try:
        saved = save_removed(store, items)
    except OSError as exc:
        raise TriageError(
            f"nothing deleted: the copy to restore them from could not be written ({exc.strerror or exc})"
        ) from None
    removed = store.delete_papers([i.paper.id for i in items])
    console.print(f"Deleted {plural(removed, 'paper')}.")
    if last:
        unsourced = undo_last_import(store, kept=spared)
        if unsourced:
            console.print(
                f"{plural(unsourced, 'paper')} the import had merged into stay, without its source."
            )
    # One line, whatever the width: the path must be copyable.
    console.print(
        f"Saved what was deleted to {escape(str(saved))}; 'triage ingest {escape(str(saved))}' "
        "brings it back (decisions, notes, lists and assessments included).",
        soft_wrap=True,
    )


def _others_on(store: Store, ids: Sequence[str]) -> dict[str, list[str]]:
    """The papers among these that other people of the store decided, noted or listed: {id:
    [their names]} (`assistant.store.people`)."""
    from assistant.store.people import everyone, holds_something

    first, _ = store.people()
    out: dict[str, list[str]] = {}
    for start in range(0, len(ids), 1000):
        found = store.get_stored(ids=list(ids[start : start + 1000]), include=["metadatas"])
        for pid, meta in zip(found["ids"], found["metadatas"] or [], strict=True):
            names = [
                who
                for who, values in everyone(dict(meta or {}), first or store.view.person).items()
                if who != store.view.person and holds_something(values)
            ]
            if names:
                out[pid] = names
    return out


def _carries_yours(item: StoredPaper, seeded: bool = False, given: Sequence[str] = ()) -> bool:
    """Whether a paper carries something of the researcher's: a decision (not one an import's
    --accept gave it: `seeded`), star, note, tags or lists (other than those the import filed
    it into: `given`)."""
    d = item.decision
    decided = d.status is not Status.NEW and not seeded
    return decided or d.starred or bool(d.note or d.tags or [n for n in d.lists if n not in given])


def _when(stamp: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "when unknown"


@app.command()
@user_errors
def split(
    paper_id: Annotated[str, typer.Argument(help="The paper a record was merged into.")],
    number: Annotated[
        int | None,
        typer.Argument(
            help="Which merged record, as 'triage show ID' numbers them (the only one if omitted)."
        ),
    ] = None,
) -> None:
    """Split a merged record off a paper: deduplication took it for this paper, and it is not.

    The record becomes a paper of its own (undecided, to be tagged); the paper gets back what it
    had without it. Decisions, notes and lists stay with the paper.

    Guide: docs/formats.md"""
    paper_id = read_ids([paper_id])[0]
    store = state.store
    if store.get(paper_id) is None:
        raise TriageError(f"no paper with id {paper_id!r}; 'triage search TEXT' finds ids")
    log = store.merge_log(paper_id)
    if number is None:
        count = len(log.entries) if log is not None else 0
        if count != 1:
            if not count:
                raise TriageError(f"nothing was merged into {paper_id}: there is nothing to split")
            raise TriageError(
                f"{paper_id} has {count} merged records: name one (1-{count}) as 'triage show' numbers them"
            )
        number = 1
    kept, split_off = store.split(paper_id, number)
    console.print(
        f"Split {escape(split_off.title)} off as {split_off.id}; {kept.id} keeps {escape(kept.title)}."
    )
    console.print(
        "[dim]'triage tag' assesses the new paper (and the old one again if its text changed).[/dim]"
    )
