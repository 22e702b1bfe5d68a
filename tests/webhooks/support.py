"""A real webhook receiver on 127.0.0.1 (a thread in the test), and checks of what it got.

The receiver answers ``503`` to its first ``fail_first`` requests, may take
``delay_s`` over each answer, records every request it read whole (body, headers,
whether it answered 2xx; one cut short by a killed sender is no request), and can be
stopped and started again on the same port: between the two, connections are refused,
as from a receiver that is down.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.harness import free_port

SECRET = "hook-secret-for-tests"


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    taken: bool  # answered 2xx
    at: float = field(default_factory=time.monotonic)

    @property
    def event(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data


class Receiver:
    def __init__(self, fail_first: int = 0, delay_s: float = 0.0) -> None:
        self.port = free_port()
        self.fail_first = fail_first
        self.delay_s = delay_s
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:
                    # The sender went away mid-request (a kill -9 between the headers
                    # and the body): no request, as for any HTTP server; nothing taken.
                    self.close_connection = True
                    return
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with receiver.lock:
                    fail = len(receiver.requests) < receiver.fail_first
                    receiver.requests.append(Received(body, dict(self.headers.items()),
                                                      not fail))
                self.send_response(503 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def taken(self) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.taken]

    def all(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


def webhook_config(path: Path, receiver: Receiver, extra: str = "") -> None:
    """Append ``[webhooks]`` for ``receiver`` to the config file at ``path``."""
    with path.open("a") as fh:
        fh.write(f'\n[webhooks]\nurl = "{receiver.url}"\nsecret = "{SECRET}"\n{extra}\n')


def signed(r: Received, secret: str = SECRET) -> bool:
    """The signature as a receiver checks it: HMAC-SHA256 of the raw body, in hex."""
    want = "sha256=" + hmac.new(secret.encode(), r.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, r.headers.get("X-Appliance-Signature", ""))


def by_message(requests: list[Received]) -> dict[str, list[dict[str, Any]]]:
    """The events each message's receiver saw, in the order they arrived, repeats
    folded (a repeat is the same event id straight again)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in requests:
        event = r.event
        seen = out[event["ref"]]
        if seen and seen[-1]["event_id"] == event["event_id"]:
            assert seen[-1] == event, "a repeat differs from the first"
            continue
        seen.append(event)
    return out
