import subprocess
import sys


def test_core_imports_without_textual() -> None:
    code = (
        "import sys\n"
        "import assistant.cli, assistant.store, assistant.ingest, assistant.triage.batch, assistant.agenda\n"
        "import assistant.index, assistant.lists, assistant.selection, assistant.triage.assess\n"
        "assert 'textual' not in sys.modules, 'the core must not import textual'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
