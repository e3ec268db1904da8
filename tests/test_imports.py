"""The house: no import cycles among the project's modules, and a command line that starts fast
(importing it loads none of the heavy libraries a command loads when it runs)."""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "assistant"
HEAVY = ("chromadb", "openai", "instructor", "textual", "sklearn")


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules that `name` imports when it runs: at module level or inside
    functions, not under `if TYPE_CHECKING:`. `from pkg import sub` counts as importing the
    module `pkg.sub` when there is one; importing `pkg.sub` is not counted as importing `pkg`
    (a package that imports its submodules would otherwise be a cycle with each of them)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return {m for m in found if m in known and m != name}


def test_the_import_graph_has_no_cycle() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert "assistant.cli.shared" in graph["assistant.cli.view"]  # the walk sees imports
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise AssertionError(f"import cycle: {cycle}") from None


def test_the_shared_cli_module_imports_no_command() -> None:
    known = modules()
    commands = {
        name for name in known if name.startswith("assistant.cli.") and name != "assistant.cli.shared"
    }
    assert not imported("assistant.cli.shared", known["assistant.cli.shared"], known) & commands


def test_the_core_imports_no_shell() -> None:
    """Shells (the command line, the review UI) depend on the core, never the reverse."""
    known = modules()
    shells = ("assistant.cli", "assistant.tui", "assistant.__main__")

    def shell(name: str) -> bool:
        return any(name == s or name.startswith(f"{s}.") for s in shells)

    for name, path in known.items():
        if not shell(name):
            assert not [m for m in imported(name, path, known) if shell(m)], name


# Floors, lowest first: a module imports only from its own floor or the floors below it.
FLOORS = [
    ("assistant.web",),
    ("assistant.ingest", "assistant.export"),
    ("assistant.feeds",),
]


def _floor(name: str) -> int | None:
    for i, packages in enumerate(FLOORS):
        if any(name == p or name.startswith(f"{p}.") for p in packages):
            return i
    return None


def test_no_import_runs_up_the_floors() -> None:
    """The polite HTTP client sits below the importers and the feeds that use it; the importers
    sit below the feeds (which import papers); nothing below imports from above."""
    known = modules()
    upward = []
    for name, path in known.items():
        mine = _floor(name)
        if mine is None:
            continue
        for other in imported(name, path, known):
            theirs = _floor(other)
            if theirs is not None and theirs > mine:
                upward.append(f"{name} -> {other}")
    assert upward == []


def _loaded_by(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_command_line_imports_no_heavy_library() -> None:
    loaded = _loaded_by("import assistant.cli")
    assert not [m for m in HEAVY if m in loaded], "a command module imports a heavy library at module level"


def test_help_and_version_import_no_heavy_library() -> None:
    for args in (["--help"], ["--version"], ["list", "--help"], ["feed", "--help"], ["export", "--help"]):
        code = (
            "import contextlib, io\nfrom assistant.cli import app\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            f"    app({args!r})"
        )
        loaded = _loaded_by(code)
        assert not [m for m in HEAVY if m in loaded], args


def test_the_ingest_formats_the_help_names_are_the_parsers() -> None:
    from assistant.cli.papers import INGEST_FORMATS
    from assistant.ingest import PARSERS

    assert INGEST_FORMATS == tuple(PARSERS)


def test_every_export_format_names_a_writer() -> None:
    import importlib

    from assistant.export import FORMATS

    for fmt in FORMATS.values():
        module, _, function = fmt.writer.partition(":")
        assert callable(getattr(importlib.import_module(f"assistant.export.{module}"), function)), fmt.name
