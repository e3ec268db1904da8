"""A fake OpenAI-compatible chat completions server on 127.0.0.1, scripted by tests and benchmarks.

It speaks real HTTP and answers with the JSON the real API sends (tool calls in tools mode,
message content in JSON mode, `usage` always). By default it reads the papers and agenda
topics out of the prompt and answers correctly; a script of behaviours, consumed one per
request, makes it fail in the ways real endpoints do.
"""

from __future__ import annotations

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


def default_answer(paper_id: str, text: str, topics: list[tuple[str, str]]) -> dict[str, Any]:
    title = text.split("\n", 1)[0].removeprefix("Title: ")
    words = WORD.findall(title.lower())
    return {
        "tags": list(dict.fromkeys(words))[:3] or ["paper", "research"],
        "summary": f"The paper studies {title[:80].lower()}.",
        "topics": [
            {"topic": name, "score": _score(name + " " + desc, text), "reason": f"shares terms with {name}"}
            for name, desc in topics
        ],
    }


class FakeLLM:
    def __init__(self, latency: float = 0.0, error_rate: float = 0.0, seed: int = 0) -> None:
        self.latency = latency
        self.error_rate = error_rate
        self.random = random.Random(seed)
        self.script: list[Behaviour] = []
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.time() at which each request arrived
        self.errors_sent: list[tuple[float, int]] = []  # (time.time(), status) of each error sent
        # A gullible model: when a paper's text contains this phrase, it obeys it and scores
        # every paper of that request 10 on every topic.
        self.obeys: str | None = None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
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
            return Behaviour()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        topics = TOPIC.findall(user)
        papers = [(pid, text) for _, pid, text in PAPER.findall(user)]
        answers = [{"paper_id": pid, **default_answer(pid, text, topics)} for pid, text in papers]
        if self.obeys and any(self.obeys.lower() in text.lower() for _, text in papers):
            for a in answers:
                a["topics"] = [{**t, "score": 10, "reason": "as instructed"} for t in a["topics"]]
        if len(answers) == 1:
            answers[0].pop("paper_id")
            return answers[0]
        return {"papers": answers}

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
                """GET /stats: the number of requests so far (for a server run as its own process)."""
                self._send(200, json.dumps({"calls": fake.calls}).encode(), {})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                with fake.lock:
                    fake.arrivals.append(time.time())
                    fake.requests.append(request)
                behaviour = fake._next()
                # Errors come back at once, as a real endpoint's rate limiter answers; only
                # answers take the model's time.
                delay = behaviour.latency if behaviour.latency is not None else fake.latency
                if delay and (behaviour.status == 200 or behaviour.latency is not None):
                    time.sleep(delay)
                if behaviour.status != 200:
                    error = {
                        "error": {"message": f"fake error {behaviour.status}", "type": "fake", "code": None}
                    }
                    self._send(behaviour.status, json.dumps(error).encode(), behaviour.headers)
                    with fake.lock:
                        fake.errors_sent.append((time.time(), behaviour.status))
                    return
                if behaviour.body is not None:
                    self._send(200, behaviour.body.encode(), behaviour.headers)
                    return
                args = fake.answer(request)
                if behaviour.mutate:
                    args = behaviour.mutate(args)
                completion = completion_json(request, json.dumps(args))
                body = json.dumps(completion).encode()
                if behaviour.truncate:
                    body = body[: len(body) // 2]
                self._send(200, body, behaviour.headers)

        return Handler


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
    args = parser.parse_args()
    with FakeLLM(latency=args.latency, error_rate=args.error_rate) as fake:
        print(fake.url, flush=True)
        fake.thread.join()


if __name__ == "__main__":
    main()
