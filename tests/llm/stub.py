"""A tiny OpenAI-compatible chat-completions server on loopback for the client tests.

Each request's user message names its item (``item-N``); the server plays that item's script, one step per
request: ``ok:TEXT`` (a proper reply with content TEXT), ``429`` / ``500`` / ``401`` (that status),
``sleep:S`` (answer 'A' after S seconds, to trip the client's timeout), ``malformed`` (a 200 that is not a
chat-completions body), ``nochoices`` (JSON without choices). When a script runs out, the last step
repeats. It records every request (item, headers, body) and the most requests ever in flight."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stub:
    def __init__(self, scripts: dict[str, list[str]] | None = None, default: str = "ok:A") -> None:
        self.scripts = {k: list(v) for k, v in (scripts or {}).items()}
        self.default = default
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                m = re.search(r"item-\d+", user)
                item = m.group(0) if m else "?"
                with stub.lock:
                    stub.requests.append(
                        {"item": item, "path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    script = stub.scripts.setdefault(item, [stub.default])
                    step = script.pop(0) if len(script) > 1 else script[0]
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    self.play(step, body)
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

            def play(self, step: str, body: dict) -> None:
                if step.isdigit():
                    self.send(
                        int(step),
                        b'{"error": {"message": "scripted"}}',
                        {"Retry-After": "0"} if step == "429" else {},
                    )
                elif step.startswith("sleep:"):
                    time.sleep(float(step[6:]))
                    self.send(200, reply("A", body["model"]))
                elif step == "malformed":
                    self.send(200, b"<html>bad gateway</html>")
                elif step == "nochoices":
                    self.send(200, b'{"id": "x", "object": "chat.completion"}')
                else:
                    time.sleep(0.02)  # some latency, so concurrent requests overlap
                    self.send(200, reply(step[3:], body["model"]))

            def send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def count(self, item: str) -> int:
        return sum(r["item"] == item for r in self.requests)

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def reply(content: str, model: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
        }
    ).encode()
