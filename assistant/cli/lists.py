"""`triage list`: reading lists from the command line (the same lists as in `triage review`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.shared import app, console, read_ids, state, subcommand, user_errors
from assistant.export import by_relevance
from assistant.render import papers_table

if TYPE_CHECKING:
    from assistant.lists import ReadingLists

list_app = typer.Typer(
    name="list",
    help="Reading lists: named, described sets of papers. A paper can be in many lists; "
    "deleting a list never deletes a paper.\n\nGuide: docs/formats.md",
    no_args_is_help=True,
)
list_app.callback()(subcommand)
app.add_typer(list_app, name="list")

Name = Annotated[str, typer.Argument(help="The list's name.", show_default=False)]
Ids = Annotated[
    list[str],
    typer.Argument(
        help="Paper ids as 'triage ranked' prints them; '-' reads ids (or 'triage ranked --json' lines) "
        "from standard input.",
        show_default=False,
    ),
]


def _lists() -> ReadingLists:
    from assistant.lists import ReadingLists

    return ReadingLists(state.store)


def _papers(n: int) -> str:
    return f"{n} paper{'s' if n != 1 else ''}"


@list_app.command("create")
@user_errors
def create(
    name: Name,
    description: Annotated[str, typer.Option("--description", "-d", help="What the list is for.")] = "",
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="A list every person of a shared store sees and files into (it shows who added "
            "what); without it a list is your own.",
        ),
    ] = False,
) -> None:
    """Create a reading list."""
    created = _lists().create(name, description, shared=shared)
    whose = " (shared: everyone using this store sees it)" if created.shared else ""
    console.print(f"Created the reading list '{escape(created.name)}'{whose}.")


@list_app.command("ls")
@user_errors
def ls() -> None:
    """Every reading list with its number of papers and description."""
    lists = _lists()
    everything = lists.all()
    if not everything:
        console.print("No reading lists yet: 'triage list create NAME' makes one.")
        return
    counts = lists.counts()
    table = Table(title="Reading lists", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("papers", justify="right")
    table.add_column("description", overflow="fold")
    table.add_column("created", style="dim", no_wrap=True)
    for rl in everything:
        made = f"{rl.created_at:%Y-%m-%d}" + (f" · shared by {rl.created_by}" if rl.shared else "")
        table.add_row(escape(rl.name), str(counts[rl.name]), escape(rl.description), escape(made))
    console.print(table)


@list_app.command("show")
@user_errors
def show(
    name: Name,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per line instead of a table.")
    ] = False,
) -> None:
    """The papers in a reading list, most relevant first."""
    lists = _lists()
    rl = lists.get(name)
    items = by_relevance(state.store.get_many(lists.members(rl.name)))
    if as_json:
        for item in items:
            sys.stdout.write(item.model_dump_json() + "\n")
        return
    if rl.description:
        console.print(escape(rl.description))
    if not items:
        console.print(
            f"The list '{escape(rl.name)}' is empty: 'triage list add {escape(rl.name)} ID...' fills it."
        )
        return
    marks = {pid: f"· added by {who}" for pid, who in lists.added_by(rl.name).items() if who}
    title = f"{escape(rl.name)}: {_papers(len(items))}" + (" (shared)" if rl.shared else "")
    console.print(papers_table(items, title, width=console.width, marks=marks))


@list_app.command("add")
@user_errors
def add(
    name: Name,
    ids: Ids,
    create: Annotated[bool, typer.Option("--create", help="Create the list if it does not exist.")] = False,
) -> None:
    """Put papers in a reading list."""
    lists = _lists()
    wanted = read_ids(ids)
    if create:
        name = lists.create(name, exist_ok=True).name
    added = lists.add(name, wanted)
    already = len(set(wanted)) - added
    note = f" ({already} already in it)" if already else ""
    console.print(f"Added {_papers(added)} to '{escape(name)}'{note}.")


@list_app.command("rm")
@user_errors
def rm(name: Name, ids: Ids) -> None:
    """Take papers out of a reading list (the papers stay in the store)."""
    wanted = read_ids(ids)
    removed = _lists().remove(name, wanted)
    absent = len(set(wanted)) - removed
    note = f" ({absent} were not in it)" if absent else ""
    console.print(f"Removed {_papers(removed)} from '{escape(name)}'{note}.")


@list_app.command("rename")
@user_errors
def rename(
    old: Annotated[str, typer.Argument(help="The list's current name.", show_default=False)],
    new: Annotated[str, typer.Argument(help="Its new name.", show_default=False)],
) -> None:
    """Rename a reading list (its papers stay in it)."""
    renamed = _lists().rename(old, new)
    console.print(f"Renamed '{escape(old)}' to '{escape(renamed.name)}'.")


@list_app.command("describe")
@user_errors
def describe(
    name: Name,
    description: Annotated[
        str, typer.Argument(help="The new description ('' clears it).", show_default=False)
    ],
) -> None:
    """Change a reading list's description."""
    rl = _lists().describe(name, description)
    console.print(f"Described '{escape(rl.name)}'.")


@list_app.command("delete")
@user_errors
def delete(name: Name) -> None:
    """Delete a reading list; its papers stay in the store (and in any other list)."""
    removed = _lists().delete(name)
    console.print(f"Deleted the reading list '{escape(name)}'; its {_papers(removed)} stay in the store.")
