"""Network drills: what a hostile or broken provider costs `triage fetch` in time and memory.

    python bench/drills_network.py [--drills gzip-bomb,big-body,trickle,hf-million] [--code DIR]

Each drill serves one misbehaving answer from a throwaway server on 127.0.0.1 (a thread of
this process, streaming its body so the bench itself stays small), saves one feed pointing at
it in a temporary store, and runs `triage fetch` as a subprocess: the row gives the time it
took and the peak RSS of that process (`os.wait4`'s ru_maxrss). The fetch must end, within
~60 s, with the feed failed in one line or cut with a note, and under 500 MB.

gzip-bomb   an RSS feed sent gzip-encoded that expands 1,000-fold (4 MB on the wire, 4 GB
            decompressed): must stop at the body cap (50 MB).
big-body    a 200 MB web page instead of a feed: must stop at the cap, not be read whole.
trickle     headers, then a byte every 5 s: must fail in about the 30 s deadline.
hf-million  a Hugging Face day of 10^6 (tiny) papers, 40 MB: the first 1,000 are read, the
            feed's --max stored, the rest ignored with a note.

`--code DIR` runs the fetch from another checkout (PYTHONPATH=DIR), to measure before a change.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import ROOT, report

COLUMNS = ["drill", "runs", "expected", "found", "lost", "duplicated", "redone", "s", "notes"]
TIME_LIMIT = 60.0  # seconds a fetch may take before the drill kills it
RSS_LIMIT_MB = 500
KILL_RSS_MB = 2048  # a fetch past this is killed at once (unbounded code reached 16 GB in 60 s)
MB = 1024 * 1024

Talk = Callable[[socket.socket], None]


# -- the throwaway server ------------------------------------------------------------------


@contextmanager
def server(talk: Talk) -> Iterator[str]:
    """A TCP server on a free 127.0.0.1 port; each connection goes to `talk` in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    stop = threading.Event()

    def talk_quietly(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                talk(conn)
            except OSError:
                pass  # the client hung up: what a bounded client does

    def accept() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()[0]
            except OSError:
                continue
            threading.Thread(target=talk_quietly, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


def head(length: int | None, kind: str, encoding: str | None = None) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Type: {kind}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if encoding:
        lines.append(f"Content-Encoding: {encoding}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


RSS_HEAD = b'<?xml version="1.0"?><rss version="2.0"><channel><title>bench</title><item><title>'


def gzip_bomb(expanded: int) -> bytes:
    """A gzip stream of an RSS start and `expanded` bytes of spaces (~1,000-fold)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * MB
    parts = [pack.compress(RSS_HEAD)]
    parts += [pack.compress(block) for _ in range(expanded // MB)]
    parts.append(pack.compress(b"</title></item></channel></rss>") + pack.flush())
    return b"".join(parts)


def send_bytes(body: bytes, kind: str, encoding: str | None = None) -> Talk:
    return lambda conn: conn.sendall(head(len(body), kind, encoding) + body)


def send_stream(size: int, kind: str, unit: bytes) -> Talk:
    """`size` bytes made of `unit`, streamed (never held whole) with no length announced: the
    client learns the size only by reading."""

    def talk(conn: socket.socket) -> None:
        conn.sendall(head(None, kind))
        block = unit * (MB // len(unit))
        sent = 0
        while sent < size:
            piece = block[: size - sent]
            conn.sendall(piece)
            sent += len(piece)

    return talk


def send_trickle(every: float) -> Talk:
    def talk(conn: socket.socket) -> None:
        conn.sendall(head(100_000, "application/rss+xml"))
        end = time.monotonic() + TIME_LIMIT + 10
        while time.monotonic() < end:
            conn.sendall(b" ")
            time.sleep(every)

    return talk


def hf_items(n: int) -> bytes:
    items = (
        b'{"paper":{"id":"%d.%05d","title":"P%d"}}' % (2601 + i // 100_000, i % 100_000, i) for i in range(n)
    )
    return b"[" + b",".join(items) + b"]"


# -- running the fetch ----------------------------------------------------------------------


def triage_cmd(code: Path | None) -> list[str]:
    if code is not None:
        return [sys.executable, "-m", "assistant"]
    exe = Path(sys.executable).parent / "triage"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "assistant"]


def environment(tmp: Path, url: str, code: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_") and not k.startswith("OPENAI_")}
    env.update(
        {
            "HOME": str(tmp / "home"),
            "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
            "XDG_CACHE_HOME": str(tmp / "home" / ".cache"),
            "XDG_DATA_HOME": str(tmp / "home" / ".data"),
            "HF_HUB_OFFLINE": "1",
            "COLUMNS": "200",
            "TRIAGE_STORE": str(tmp / "store"),
            "TRIAGE_HF_URL": f"{url}/api/daily_papers",
            "TRIAGE_HF_DELAY": "0",
            "TRIAGE_RSS_DELAY": "0",
        }
    )
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def run(
    args: list[str], cwd: Path, env: dict[str, str], code: Path | None
) -> tuple[int | str, float, float, str]:
    """(exit code, or how it was killed; seconds; peak RSS in MB; output) of `triage ARGS`."""
    log = cwd / "out.log"
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*triage_cmd(code), *args], cwd=cwd, env=env, stdout=out, stderr=out)
    killed = ""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > TIME_LIMIT:
            killed = f"killed after {TIME_LIMIT:.0f} s"
        elif rss_mb(proc.pid) > KILL_RSS_MB:
            killed = f"killed at {KILL_RSS_MB} MB"
        if killed:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    seconds = time.perf_counter() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    return (killed or proc.returncode), seconds, usage.ru_maxrss / 1024, text


def rss_mb(pid: int) -> float:
    """The process's resident memory now (0 where /proc cannot say)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def fetch_drill(
    tmp: Path, label: str, feed: list[str], talk: Talk, expect: str, code: Path | None
) -> tuple[list[Any], dict[str, Any]]:
    """Save one feed against a server saying `talk`, fetch it, and judge the outcome: it must
    end, under 500 MB, with no traceback and its output saying `expect`."""
    where = Path(tempfile.mkdtemp(prefix="drill-", dir=tmp))
    with server(talk) as url:
        env = environment(where, url, code)
        args = [a.replace("URL", url) for a in feed]
        added = subprocess.run(
            [*triage_cmd(code), "feed", "add", "drill", *args], cwd=where, env=env, capture_output=True
        )
        if added.returncode != 0:
            raise RuntimeError(
                f"feed add failed: {added.stdout.decode()[-300:]} {added.stderr.decode()[-300:]}"
            )
        code_, seconds, peak, text = run(["fetch", "drill"], where, env, code)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = next((ln for ln in lines if expect in ln), "") or next(
        (ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else ""
    )
    traceback = "Traceback" in text
    ok = isinstance(code_, int) and expect in text and not traceback and peak < RSS_LIMIT_MB
    outcome = code_ if isinstance(code_, str) else f"exit {code_}"
    note = f"{seconds:.1f}s, peak RSS {peak:.0f} MB, {outcome}" + (", TRACEBACK" if traceback else "")
    note += f": {said[:140]}"
    row = [label, 1, 1, int(ok), int(not ok), 0, 0, note]
    details = {
        "seconds": seconds,
        "peak_rss_mb": round(peak, 1),
        "exit_code": code_,
        "traceback": traceback,
        "message": said,
        "as_expected": ok,
    }
    return row, details


# -- the drills ------------------------------------------------------------------------------


def drill_gzip_bomb(tmp: Path, code: Path | None = None) -> tuple[list[Any], dict[str, Any]]:
    """An RSS feed gzip-encoded, 4 MB on the wire, 4 GB decompressed."""
    bomb = gzip_bomb(4096 * MB)
    return fetch_drill(
        tmp,
        f"gzip bomb ({len(bomb) / MB:.0f} MB -> 4 GB)",
        ["--rss", "URL/feed.xml"],
        send_bytes(bomb, "application/rss+xml", "gzip"),
        "is larger than",
        code,
    )


def drill_big_body(tmp: Path, code: Path | None = None) -> tuple[list[Any], dict[str, Any]]:
    """A 200 MB web page where the feed should be."""
    return fetch_drill(
        tmp,
        "200 MB body",
        ["--rss", "URL/feed.xml"],
        send_stream(200 * MB, "text/html", b"<p>lorem ipsum dolor</p>\n"),
        "is larger than",
        code,
    )


def drill_trickle(tmp: Path, code: Path | None = None) -> tuple[list[Any], dict[str, Any]]:
    """Headers at once, then a byte every 5 s."""
    return fetch_drill(
        tmp,
        "trickle (a byte every 5 s)",
        ["--rss", "URL/feed.xml"],
        send_trickle(5.0),
        "took longer than",
        code,
    )


def drill_hf_million(tmp: Path, code: Path | None = None) -> tuple[list[Any], dict[str, Any]]:
    """A Hugging Face day of 10^6 tiny papers."""
    body = hf_items(1_000_000)
    return fetch_drill(
        tmp,
        f"HF day of 10^6 papers ({len(body) / MB:.0f} MB)",
        ["--hf-daily", "--first-days", "1", "--max", "20"],
        send_bytes(body, "application/json"),
        "listed more than",
        code,
    )


DRILLS: dict[str, Callable[[Path, Path | None], tuple[list[Any], dict[str, Any]]]] = {
    "gzip-bomb": drill_gzip_bomb,
    "big-body": drill_big_body,
    "trickle": drill_trickle,
    "hf-million": drill_hf_million,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drills", default=",".join(DRILLS))
    parser.add_argument("--code", type=Path, default=None, help="run the fetch from this checkout")
    args = parser.parse_args()
    code = args.code.resolve() if args.code else None
    rows: list[list[Any]] = []
    extra: dict[str, Any] = {"code": str(code or ROOT), "drills": {}}
    with tempfile.TemporaryDirectory(prefix="triage-net-drills-") as name:
        for key in args.drills.split(","):
            start = time.perf_counter()
            row, details = DRILLS[key](Path(name), code)
            rows.append([*row[:7], time.perf_counter() - start, row[7]])
            extra["drills"][row[0]] = details
    report("drills_network", "Network drills: time and peak memory of `triage fetch`", COLUMNS, rows, extra)


if __name__ == "__main__":
    main()
