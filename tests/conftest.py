"""Shared fixtures: isolated user dirs, no network beyond loopback, real stores."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import Settings, load_settings
from assistant.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE = Path(__file__).resolve().parents[1] / "assistant" / "data" / "sample_papers.jsonl"
# Real files from public repositories (exports, feeds, listing pages), kept beside the project in
# ../shared/fixtures/ with their sources and licences: read where they are, never copied here.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def shared(*parts: str) -> Path:
    """A file of ../shared/fixtures/; the test (or, called at import, its module) skips with
    the reason where the shared fixtures are absent."""
    path = SHARED.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"needs {path}: the shared fixtures beside the project", allow_module_level=True)
    return path


# The fidelity tests' real exports, by the names the tests give them.
_REAL_EXPORTS = {
    "zotero_bbt.bib": "bibtex_bbt_export_901.bib",
    "zotero_short_dois.json": "csljson_bbt_1179.json",
    "ris_zotero_asreview.ris": "ris_zotero_asreview.ris",
}


def fidelity_file(name: str) -> Path:
    """A fidelity fixture: the invented ones in tests/fixtures/fidelity/, the real exports
    where they are kept."""
    if name in _REAL_EXPORTS:
        return shared("realworld", _REAL_EXPORTS[name])
    return FIXTURES / "fidelity" / name


_ENV_VARS = (
    "TRIAGE_STORE",
    "TRIAGE_AGENDA",
    "TRIAGE_CHROMA_URL",
    "TRIAGE_CHROMA_TOKEN",
    "TRIAGE_MODEL",
    "TRIAGE_CONFIG",
    "TRIAGE_EMBEDDER",
    "TRIAGE_COLLECTION",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(scope="session", autouse=True)
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty HOME for the fixtures that outlive a test (store templates made before any
    test's `isolated`): one per session, so one per pytest-xdist worker, never the user's."""
    home = tmp_path_factory.mktemp("session") / "home"
    with pytest.MonkeyPatch.context() as patch:
        _home(home, patch)
        yield home


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in its own cwd with an empty HOME and no triage/OpenAI environment."""
    return _isolate(tmp_path, monkeypatch)


def _home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`home` (made) as HOME and the XDG folders in it; no triage/OpenAI environment."""
    home.mkdir()
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # No detached estimate refresher (`assistant.estimate_refresh`) unless a test asks for one.
    monkeypatch.setenv("TRIAGE_NO_BACKGROUND", "1")


def _isolate(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """root/home as HOME (`_home`), root/work as the cwd: that cwd."""
    _home(root / "home", monkeypatch)
    work = root / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`triage demo --top 3` run once per session (per pytest-xdist worker), in a process of its
    own so that all it wrote is on disk, with a home and cwd laid out as `isolated` lays them."""
    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch:
        work = _isolate(root, patch)
        result = subprocess.run(
            [str(Path(sys.executable).parent / "triage"), "demo", "--top", "3"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (work / "store").is_dir() and (work / "agenda.md").is_file()
    return root


@pytest.fixture
def demo_store(demo_template: Path, isolated: Path) -> Path:
    """This test's home and cwd as `triage demo --top 3` leaves them (a copy of the session's
    `demo_template`, cheaper than importing and assessing the sample in every test): its cwd."""
    shutil.copytree(demo_template / "home", isolated.parent / "home", dirs_exist_ok=True)
    shutil.copytree(demo_template / "work", isolated, dirs_exist_ok=True)
    return isolated


@pytest.fixture
def decided(demo_store: Path) -> Path:
    """The sample store, assessed offline, with decisions that teach the personal model (8
    accepted, 12 rejected) and give it an estimate: its cwd."""
    from assistant.models import Status

    store = Store.open(load_settings())
    ids = [pid for pid, _ in store.iter_metadata()]
    store.set_status(ids[:8], Status.ACCEPTED)
    store.set_status(ids[8:20], Status.REJECTED)
    return demo_store


# The modules that take longest, run first: `make test` runs the suite on two pytest-xdist
# workers (`-n 2 --dist loadfile --no-loadscope-reorder`), which take whole modules in this
# order, so that no long module starts last while the other worker has nothing left to do.
SLOW_MODULES_FIRST = (
    "test_corpus.py",
    "test_disk.py",
    "test_fidelity_consumers.py",
    "test_tui.py",
    "test_concurrency.py",
    "test_personal.py",
    "test_cli.py",
    "test_mirror.py",
    "test_personal_fast.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: else as collected


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0] if isinstance(address, tuple) else str(address)
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"test tried to reach {host}: only 127.0.0.1 is allowed")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches beyond this machine."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chroma_exe() -> str:
    """The `chroma` executable that comes with the chromadb package."""
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    if exe is None:
        pytest.fail("the 'chroma' executable (from the chromadb package) is not installed")
    return exe


def wait_for_heartbeat(url: str, proc: subprocess.Popen[bytes], log: Path, what: str = "") -> None:
    """Wait until a Chroma server (or the proxy in front of one) at `url` answers its heartbeat;
    fail with the end of its log if the process exits or 30 s pass."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as resp:
                json.load(resp)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{what or url} did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)


def start_chroma(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """A real `chroma run` on 127.0.0.1:`port` with its data in `data`, answering once returned."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [chroma_exe(), "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for_heartbeat(f"http://127.0.0.1:{port}", proc, log, "chroma server")
    return proc


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `chroma run` server on a free 127.0.0.1 port, for the whole session."""
    path = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    proc = start_chroma(path / "data", port, path / "server.log")
    yield f"http://127.0.0.1:{port}"
    stop_process(proc)


@pytest.fixture(params=["embedded", "server"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings for an empty store: embedded in tmp_path, or a fresh collection on the server."""
    if request.param == "server":
        url = request.getfixturevalue("chroma_server")
        return load_settings(
            chroma_url=url, collection=f"papers-{uuid.uuid4().hex[:12]}", store=tmp_path / "unused-store"
        )
    return load_settings(store=tmp_path / "store")


@pytest.fixture
def store(settings: Settings) -> Store:
    return Store.open(settings)


@pytest.fixture
def embedded_settings(tmp_path: Path) -> Settings:
    return load_settings(store=tmp_path / "store")


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sample_records(n: int | None = None) -> list[dict[str, object]]:
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return records[:n] if n else records


os.environ.setdefault("COLUMNS", "140")
