"""A lab's Chroma server behind its token, as deploy/ sets it up and docs/server.md describes:
a real `chroma run`, the real nginx proxy rendered from deploy/nginx/ with tokens made by
deploy/new-token, and the triage CLI with TRIAGE_CHROMA_TOKEN. `chroma run` (Chroma 1.x)
checks no credentials itself: the proxy is what refuses a request without the token."""

from __future__ import annotations

import configparser
import json
import logging
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chromadb
import pytest
import yaml
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from conftest import free_port, sample_records, start_chroma, stop_process, wait_for_heartbeat, write_lines

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
TEMPLATE = DEPLOY / "nginx" / "triage-chroma.conf.template"
TOKENS_PATH = "/etc/nginx/triage-chroma-tokens"  # where the template reads the tokens
AGENDA = "## Adapters\nParameter-efficient adapters, sparse adapters, low-resource translation.\n"

runner = CliRunner()


@dataclass
class Lab:
    url: str  # the proxy, as the lab's clients reach it
    alice: str  # two tokens the proxy accepts
    bob: str
    logs: Path  # the proxy's logs and configuration


def _rendered(upstream: str) -> str:
    """The proxy's configuration as the nginx image (or a host's `envsubst`) renders it."""
    envsubst = shutil.which("envsubst")
    if envsubst is None:
        return TEMPLATE.read_text().replace("${CHROMA_UPSTREAM}", upstream)
    return subprocess.run(
        [envsubst, "${CHROMA_UPSTREAM}"],
        input=TEMPLATE.read_text(),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CHROMA_UPSTREAM": upstream},
    ).stdout


def new_token(name: str, tokens: Path) -> str:
    made = subprocess.run(
        ["sh", str(DEPLOY / "new-token"), name, str(tokens)], capture_output=True, text=True, check=True
    )
    return made.stdout.strip()


@pytest.fixture(scope="module")
def lab(chroma_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The session's `chroma run` behind deploy/'s nginx proxy, with two people's tokens."""
    nginx = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin")
    if nginx is None:
        if os.environ.get("TRIAGE_REQUIRE_PROXY"):
            pytest.fail("nginx is not installed: .ci/run installs it (the proxy that checks the token)")
        pytest.skip("needs nginx (apt-get install nginx): the proxy that checks the token")
    root = tmp_path_factory.mktemp("proxy")
    tokens = root / "tokens"
    alice, bob = new_token("alice", tokens), new_token("bob", tokens)
    port = free_port()
    site = _rendered(chroma_server.removeprefix("http://"))
    include = f"include {TOKENS_PATH};"
    for fixed in ("listen 8000;", include):
        assert site.count(fixed) == 1, f"the template no longer has {fixed!r}: update this test"
    site = site.replace("listen 8000;", f"listen 127.0.0.1:{port};").replace(include, f"include {tokens};")
    (root / "site.conf").write_text(site)
    (root / "nginx.conf").write_text(
        f"pid {root}/nginx.pid;\nerror_log {root}/error.log info;\nevents {{}}\n"
        f"http {{\n  access_log {root}/access.log;\n  include site.conf;\n}}\n"
    )
    out = root / "nginx.out"
    with out.open("wb") as log:
        proc = subprocess.Popen(
            [nginx, "-p", f"{root}/", "-c", str(root / "nginx.conf"), "-g", "daemon off;"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    wait_for_heartbeat(url, proc, out)
    yield Lab(url, alice, bob, root)
    stop_process(proc)


def triage(url: str, collection: str, *args: str, token: str | None = None) -> Any:
    env = {
        "COLUMNS": "160",
        "TRIAGE_CHROMA_URL": url,
        "TRIAGE_COLLECTION": collection,
        "TRIAGE_CHROMA_TOKEN": token,  # None: unset
    }
    return runner.invoke(app, list(args), env=env)


def new_collection() -> str:
    return f"lab-{uuid.uuid4().hex[:12]}"


def ids_and_status(url: str, collection: str, token: str | None) -> dict[str, tuple[str, str | None]]:
    """Each paper's title, status and note, from a jsonl export of the whole store."""
    exported = triage(url, collection, "export", "-f", "jsonl", token=token)
    assert exported.exit_code == 0, exported.output
    decisions = {}
    for line in exported.stdout.splitlines():
        row = json.loads(line)
        decision = row.get("decision") or {}
        decisions[row["paper"]["title"]] = (decision.get("status", "new"), decision.get("note"))
    return decisions


def test_the_right_token_works_end_to_end_and_is_never_shown(
    lab: Lab, isolated: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    (isolated / "agenda.md").write_text(AGENDA)
    papers = write_lines(tmp_path / "papers.jsonl", [json.dumps(r) for r in sample_records(8)])
    collection = new_collection()
    outputs = []
    for args in (("ingest", str(papers)), ("tag",), ("ranked", "--json", "--top", "3")):
        result = triage(lab.url, collection, *args, token=lab.alice)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    first = json.loads(outputs[-1].splitlines()[0])["paper"]
    # Bob's token is as good as Alice's: one store for the lab.
    marked = triage(lab.url, collection, "mark", first["id"], "--accept", token=lab.bob)
    assert marked.exit_code == 0, marked.output
    accepted = triage(lab.url, collection, "ranked", "--status", "accepted", "--json", token=lab.alice)
    assert [json.loads(line)["paper"]["id"] for line in accepted.output.splitlines()] == [first["id"]]
    doctor = triage(lab.url, collection, "doctor", token=lab.alice)
    assert "8 papers" in doctor.output
    outputs += [marked.output, accepted.output, doctor.output, repr(load_settings())]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIAGE_CHROMA_TOKEN", lab.alice)
        outputs.append(repr(load_settings()) + str(load_settings().model_dump()))
    seen = "\n".join([*outputs, caplog.text, *(p.read_text() for p in lab.logs.glob("*.log"))])
    assert lab.alice not in seen and lab.bob not in seen
    assert "alice" not in (lab.logs / "access.log").read_text()  # names only in the tokens file


@pytest.mark.parametrize("token", [None, "wrong-token-123"])
def test_a_missing_or_wrong_token_is_a_one_line_error_saying_what_to_set(
    lab: Lab, token: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for args in (("stats",), ("ranked",)):
        result = triage(lab.url, new_collection(), *args, token=token)
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: the Chroma server at " + lab.url), lines
        assert "TRIAGE_CHROMA_TOKEN" in lines[0] and "Traceback" not in result.output
        assert ("asks for a token" if token is None else "refused the token") in lines[0]
    doctor = triage(lab.url, new_collection(), "doctor", token=token)
    assert doctor.exit_code != 0 and "TRIAGE_CHROMA_TOKEN" in doctor.output
    if token is not None:
        assert token not in result.output + doctor.output + caplog.text


def test_the_proxy_lets_only_the_heartbeat_through_without_a_token(lab: Lab) -> None:
    with urllib.request.urlopen(f"{lab.url}/api/v2/heartbeat", timeout=5) as resp:
        assert resp.status == 200
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-Chroma-Token": lab.alice}):
        request = urllib.request.Request(f"{lab.url}/api/v2/tenants/default_tenant", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401
    # Chroma's own client, as any other program of the lab would use it, with the token.
    client = chromadb.HttpClient(
        host="127.0.0.1",
        port=int(lab.url.rsplit(":", 1)[1]),
        settings=chromadb.config.Settings(
            anonymized_telemetry=False,
            chroma_client_auth_provider="chromadb.auth.token_authn.TokenAuthClientProvider",
            chroma_client_auth_credentials=lab.bob,
        ),
    )
    assert client.heartbeat() > 0


def test_a_jsonl_backup_restores_papers_and_decisions_into_a_fresh_store(
    lab: Lab, isolated: Path, tmp_path: Path
) -> None:
    papers = write_lines(tmp_path / "papers.jsonl", [json.dumps(r) for r in sample_records(6)])
    source, fresh = new_collection(), new_collection()
    assert triage(lab.url, source, "ingest", str(papers), token=lab.alice).exit_code == 0
    some = json.loads(
        triage(lab.url, source, "export", "-f", "jsonl", token=lab.alice).stdout.splitlines()[0]
    )
    assert triage(lab.url, source, "mark", some["paper"]["id"], "--reject", token=lab.alice).exit_code == 0
    assert triage(lab.url, source, "note", some["paper"]["id"], "off topic", token=lab.alice).exit_code == 0
    # A colleague's decision on the same paper is in the backup too, and comes back as theirs.
    ben = ("--user", "ben")
    assert (
        triage(lab.url, source, *ben, "mark", some["paper"]["id"], "--accept", token=lab.bob).exit_code == 0
    )
    backup = tmp_path / "backup.jsonl"
    made = triage(lab.url, source, "export", "-f", "jsonl", "--vectors", "-o", str(backup), token=lab.alice)
    assert made.exit_code == 0, made.output
    restored = triage(lab.url, fresh, "ingest", str(backup), token=lab.bob)
    assert restored.exit_code == 0, restored.output
    before = ids_and_status(lab.url, source, lab.alice)
    assert len(before) == 6 and ("rejected", "off topic") in before.values()
    assert ids_and_status(lab.url, fresh, lab.bob) == before
    accepted = triage(lab.url, fresh, *ben, "export", "-f", "jsonl", "--status", "accepted", token=lab.bob)
    assert [json.loads(line)["paper"]["id"] for line in accepted.stdout.splitlines()] == [some["paper"]["id"]]


def _chroma_run(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    return start_chroma(data, port, log), f"http://127.0.0.1:{port}"


def test_a_copy_of_a_stopped_servers_data_directory_is_the_whole_store(
    isolated: Path, tmp_path: Path
) -> None:
    """docs/server.md's backup of the data directory: stop the server, copy, start it again; a
    server started on the copy has the same papers and decisions."""
    log = tmp_path / "chroma.log"
    proc, url = _chroma_run(tmp_path / "data", log)
    try:
        papers = write_lines(tmp_path / "papers.jsonl", [json.dumps(r) for r in sample_records(4)])
        assert triage(url, "papers", "ingest", str(papers)).exit_code == 0
        some = json.loads(triage(url, "papers", "export", "-f", "jsonl").stdout.splitlines()[0])["paper"]
        assert triage(url, "papers", "mark", some["id"], "--accept").exit_code == 0
        before = ids_and_status(url, "papers", None)
    finally:
        stop_process(proc)
    # Meanwhile, a command says in one line that the server is not there.
    stopped = triage(url, "papers", "stats")
    assert stopped.exit_code == 1 and "Traceback" not in stopped.output
    said = stopped.output.strip()
    assert said.startswith(f"error: cannot reach the Chroma server at {url}: ") and "\n" not in said
    assert said.endswith("(is it running?)")
    shutil.copytree(tmp_path / "data", tmp_path / "copy")
    proc, url = _chroma_run(tmp_path / "copy", log)
    try:
        assert ids_and_status(url, "papers", None) == before
        assert [status for status, _ in before.values()].count("accepted") == 1
    finally:
        stop_process(proc)


def test_the_compose_file_pins_the_clients_chroma_and_publishes_only_the_proxy(tmp_path: Path) -> None:
    compose = DEPLOY / "compose.yaml"
    spec = yaml.safe_load(compose.read_text())
    chroma, proxy = spec["services"]["chroma"], spec["services"]["proxy"]
    assert chroma["image"] == f"chromadb/chroma:{chromadb.__version__}"
    assert "ports" not in chroma and any(v.endswith(":/data") for v in chroma["volumes"])
    assert proxy["ports"] == ["${TRIAGE_CHROMA_PORT:-8000}:8000"]
    mounts = {v if isinstance(v, str) else v["target"] for v in proxy["volumes"]}
    assert any(m.startswith("./nginx/triage-chroma.conf.template:/etc/nginx/templates/") for m in mounts)
    assert TOKENS_PATH in mounts
    assert {chroma["restart"], proxy["restart"]} == {"unless-stopped"}
    # `docker compose` (v2) checks it against the Compose Specification where it exists; the
    # old `docker-compose` (v1) knows only the older formats and is not asked.
    docker = shutil.which("docker")
    plugin = docker and subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
    if not plugin or plugin.returncode != 0:
        return
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    (tmp_path / "deploy" / "tokens").touch()
    checked = subprocess.run(
        [str(docker), "compose", "config", "-q"], capture_output=True, text=True, cwd=tmp_path / "deploy"
    )
    assert checked.returncode == 0, checked.stderr


def test_the_systemd_unit_runs_chroma_as_its_own_user_on_loopback(tmp_path: Path) -> None:
    unit = DEPLOY / "triage-chroma.service"
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    service = parser["Service"]
    assert service["User"] == "triage-chroma" and service["StateDirectory"] == "triage-chroma"
    assert service["Restart"] == "on-failure"
    command = service["ExecStart"].split()
    assert command[1:3] == ["run", "--path"] and command[3] == "/var/lib/triage-chroma"
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # parsed above; systemd-analyze checks every key where it exists
    # The unit as installed, with the chroma of this environment where /opt/triage-chroma's is.
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent))
    assert chroma is not None
    local = tmp_path / unit.name
    local.write_text(unit.read_text().replace(command[0], chroma))
    verified = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stderr.strip() == "", verified.stderr
