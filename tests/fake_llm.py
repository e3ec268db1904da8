"""A fake OpenAI-compatible chat completions server on 127.0.0.1, scripted by tests and benchmarks.

It speaks real HTTP and answers with the JSON the real API sends (tool calls in tools mode,
message content in JSON mode, `usage` always). By default it reads the papers and agenda
topics out of the prompt and answers correctly; a script of behaviours, consumed one per
request, makes it fail in the ways real endpoints do.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A paper between its call's markers: <<<PAPER-code id=...>>> ... <<<END PAPER-code>>>.
PAPER = re.compile(r"<<<PAPER-([0-9a-f]+) id=(\S+)>>>\n(.*?)<<<END PAPER-\1>>>", re.DOTALL)
TOPIC = re.compile(r'^- "(.+?)": (.*)$', re.MULTILINE)
WORD = re.compile(r"[a-z]{4,}")


@dataclass
class Behaviour:
    """What to do with one request. Leave everything unset for a correct answer."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # a raw body instead of a completion
    truncate: bool = False  # cut the completion JSON in half
    mutate: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # change the arguments
    latency: float | None = None


def _score(topic: str, text: str) -> int:
    topic_words = set(WORD.findall(topic.lower()))
    text_words = set(WORD.findall(text.lower()))
    return min(10, 2 * len(topic_words & text_words))


def hash_score(topic: str, text: str) -> int:
    """A score 0-10 that depends on the topic and this paper's own text only."""
    digest = hashlib.sha256(f"{topic}\x1f{' '.join(text.split())}".encode()).digest()
    return digest[0] % 11


def default_answer(
    paper_id: str, text: str, topics: list[tuple[str, str]], hashed: bool = False
) -> dict[str, Any]:
    title = text.split("\n", 1)[0].removeprefix("Title: ")
    words = WORD.findall(title.lower())

    def score(name: str, desc: str) -> int:
        return hash_score(name, text) if hashed else _score(name + " " + desc, text)

    return {
        "tags": list(dict.fromkeys(words))[:3] or ["paper", "research"],
        "summary": f"The paper studies {title[:80].lower()}.",
        "topics": [
            {"topic": name, "score": score(name, desc), "reason": f"shares terms with {name}"}
            for name, desc in topics
        ],
    }


class Server(ThreadingHTTPServer):
    """A thread per connection, and a listen backlog as deep as a real server's (socketserver's
    default is 5: of 8 or 32 clients connecting at once, the kernel dropped the connections beyond
    it and those clients waited TCP's one-second retransmission before they were let in)."""

    request_queue_size = 128
    daemon_threads = True


# Faults a real endpoint shows, by name (see FakeLLM.faults).
FAULTS = ("429", "500", "garbage", "truncate")


class FakeLLM:
    def __init__(
        self,
        latency: float = 0.0,
        error_rate: float = 0.0,
        seed: int = 0,
        faults: dict[str, float] | None = None,
        hash_scores: bool = False,
    ) -> None:
        self.latency = latency
        self.error_rate = error_rate
        # Share of requests answered with each fault of FAULTS (after error_rate's 429s).
        self.faults = dict(faults or {})
        # Scores from a hash of each paper's own text: the same paper gets the same scores
        # whichever papers share its request.
        self.hash_scores = hash_scores
        self.random = random.Random(seed)
        self.script: list[Behaviour] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # the HTTP headers of each request (names in lower case)
        self.arrivals: list[float] = []  # time.time() at which each request arrived
        self.errors_sent: list[tuple[float, int]] = []  # (time.time(), status) of each error sent
        # A gullible model: when a paper's text contains this phrase (or one of these), it obeys
        # it and scores every paper of that request 10 on every topic ("request"), or only the
        # paper that says it ("paper").
        self.obeys: str | list[str] | None = None
        self.obey_scope = "request"
        self.batches: list[list[str]] = []  # the paper ids of each answered request, in order
        self.lock = threading.Lock()
        self.server = Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _next(self) -> Behaviour:
        with self.lock:
            if self.script:
                return self.script.pop(0)
            if self.error_rate and self.random.random() < self.error_rate:
                return Behaviour(status=429, headers={"Retry-After": "0.2"})
            if self.faults:
                roll = self.random.random()
                for kind in FAULTS:
                    roll -= self.faults.get(kind, 0.0)
                    if roll < 0:
                        return fault(kind)
            return Behaviour()

    def _obeyed(self, text: str) -> bool:
        phrases = [self.obeys] if isinstance(self.obeys, str) else self.obeys or []
        return any(p.lower() in text.lower() for p in phrases)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        topics = TOPIC.findall(user)
        papers = [(pid, text) for _, pid, text in PAPER.findall(user)]
        with self.lock:
            self.batches.append([pid for pid, _ in papers])
        answers = [
            {"paper_id": pid, **default_answer(pid, text, topics, self.hash_scores)} for pid, text in papers
        ]
        obeyed = [self._obeyed(text) for _, text in papers]
        for a, own in zip(answers, obeyed, strict=True):
            if own or (self.obey_scope == "request" and any(obeyed)):
                a["topics"] = [{**t, "score": 10, "reason": "as instructed"} for t in a["topics"]]
        if len(answers) == 1:
            answers[0].pop("paper_id")
            return answers[0]
        return {"papers": answers}

    def reply(self, request: dict[str, Any], behaviour: Behaviour) -> tuple[int, bytes]:
        """The status and body this behaviour answers the request with."""
        if behaviour.status != 200:
            error = {"error": {"message": f"fake error {behaviour.status}", "type": "fake", "code": None}}
            return behaviour.status, json.dumps(error).encode()
        if behaviour.body is not None:
            return 200, behaviour.body.encode()
        args = self.answer(request)
        if behaviour.mutate:
            args = behaviour.mutate(args)
        body = json.dumps(completion_json(request, json.dumps(args))).encode()
        return 200, body[: len(body) // 2] if behaviour.truncate else body

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave at once, as a real server's do
            wbufsize = 1 << 16

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                """GET /stats: the number of requests so far (for a server run as its own process);
                GET /batches: the paper ids of each answered request."""
                if self.path.rstrip("/").endswith("/batches"):
                    with fake.lock:
                        body = json.dumps({"batches": fake.batches}).encode()
                    self._send(200, body, {})
                    return
                self._send(200, json.dumps({"calls": fake.calls}).encode(), {})

            def do_POST(self) -> None:  # noqa: N802
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                with fake.lock:
                    fake.arrivals.append(time.time())
                    fake.requests.append(request)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                behaviour = fake._next()
                status, body = fake.reply(request, behaviour)
                # Errors come back at once, as a real endpoint's rate limiter answers; only
                # answers take the model's time, counted from the request's arrival (the fake's
                # own work is part of it, not added to it).
                delay = behaviour.latency if behaviour.latency is not None else fake.latency
                if delay and (behaviour.status == 200 or behaviour.latency is not None):
                    time.sleep(max(0.0, arrived + delay - time.monotonic()))
                self._send(status, body, behaviour.headers)
                if status != 200:
                    with fake.lock:
                        fake.errors_sent.append((time.time(), status))

        return Handler


def fault(kind: str) -> Behaviour:
    """One of FAULTS as a behaviour."""
    if kind == "429":
        return Behaviour(status=429, headers={"Retry-After": "0.2"})
    if kind == "500":
        return Behaviour(status=500)
    if kind == "garbage":
        return Behaviour(body="<html>502 Bad Gateway</html>")
    if kind == "truncate":
        return Behaviour(truncate=True)
    raise ValueError(f"unknown fault {kind!r}: one of {FAULTS}")


def parse_faults(text: str) -> dict[str, float]:
    """'429=0.02,500=0.02,garbage=0.02,truncate=0.02' as {kind: share}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, share = part.partition("=")
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}: one of {FAULTS}")
        out[kind] = float(share)
    return out


def completion_json(request: dict[str, Any], arguments: str) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content") or "")) for m in request["messages"])
    prompt_chars += len(json.dumps(request.get("tools", [])))
    usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(arguments) // 4}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": arguments}
        finish = "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def main() -> None:
    """Run the fake as a process of its own: prints its URL, serves until killed."""
    import argparse

    parser = argparse.ArgumentParser(description="fake OpenAI-compatible endpoint on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--faults", default="", help="e.g. 429=0.02,500=0.02,garbage=0.02,truncate=0.02")
    parser.add_argument("--hash-scores", action="store_true", help="scores from each paper's own text")
    parser.add_argument("--obeys", action="append", default=[], help="a phrase the model obeys (repeatable)")
    parser.add_argument("--obey-scope", choices=("request", "paper"), default="request")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with FakeLLM(
        latency=args.latency,
        error_rate=args.error_rate,
        seed=args.seed,
        faults=parse_faults(args.faults),
        hash_scores=args.hash_scores,
    ) as fake:
        fake.obeys = args.obeys or None
        fake.obey_scope = args.obey_scope
        print(fake.url, flush=True)
        fake.thread.join()


if __name__ == "__main__":
    main()
