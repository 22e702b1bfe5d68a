"""The race of note 000, end to end: every report arrives before its message's
submission is recorded, reordered, repeated, beside reports for refs we never sent.

A fake gateway speaking the ``http`` provider's wire format POSTs each message's
reports to the appliance *before* it answers the submission, so each one reaches the
appliance while the message is still ``SENDING``. The appliance clock is frozen, so
the reconciler's first retry (one second later) never comes due: every report must
be applied by the sender's own commit (DLR-6), at zero delay.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.providers.http_json import body_signature
from tests.harness import Server, create_account, db_rows, wait_for
from tests.reports.support import PROVIDER, SECRET

T0 = 1_767_225_600_000
MESSAGES = 60
GHOSTS = 7


def final_of(ref: str) -> str:
    return "failed" if hashlib.sha256(ref.encode()).digest()[0] % 5 == 0 else "delivered"


def stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


class Gateway:
    """Answers ``POST /messages`` only after the message's reports were delivered."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.callback_statuses: list[int] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                msg = json.loads(self.rfile.read(size))
                outer.report_before_answering(msg["ref"], msg["callback_url"])
                body = json.dumps({"id": "gw-" + msg["ref"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def report_before_answering(self, ref: str, callback_url: str) -> None:
        final = {"ref": ref, "status": final_of(ref), "reported_at": stamp(T0 + 3000)}
        # Newest first, an intermediate in between, the final twice, the oldest last.
        reports = [final, {"ref": ref, "status": "enroute", "reported_at": stamp(T0 + 2000)},
                   final, {"ref": ref, "status": "accepted", "reported_at": stamp(T0 + 1000)}]
        with httpx.Client(timeout=30) as client:
            for item in reports:
                body = json.dumps(item).encode()
                r = client.post(callback_url, content=body, headers={
                    "Content-Type": "application/json",
                    "X-Signature": body_signature(body, SECRET)})
                with self.lock:
                    self.callback_statuses.append(r.status_code)
        with self.lock:
            self.submitted.append(ref)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway()
    try:
        yield gw
    finally:
        gw.close()


def states(data_dir: Path) -> dict[str, tuple[str, int]]:
    return {str(r[0]): (str(r[1]), int(r[2])) for r in db_rows(
        data_dir, "SELECT ref, state, state_at FROM messages")}


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_reports_that_beat_their_messages_are_applied_at_once(
        data_dir: Path, tmp_path: Path, gateway: Gateway) -> None:
    clock = tmp_path / "clock"
    clock.write_text(str(T0))
    config = tmp_path / "appliance.toml"
    config.write_text(f'[providers.{PROVIDER}]\nkind = "http"\nbase_url = "{gateway.url}"\n'
                      f'secret = "{SECRET}"\nrate_per_s = 1000\nconcurrency = 8\n')
    server = Server(data_dir, config=config, env={"APPLIANCE_CLOCK_FILE": str(clock)}).start()
    try:
        key = create_account(data_dir)
        with server.client(key) as api, server.client() as callbacks:
            refs = []
            for i in range(MESSAGES):
                r = api.post("/api/messages", json={"to": f"+90532{1000000 + i:07d}",
                                                    "body": "race", "provider": PROVIDER})
                assert r.status_code == 202, r.text
                refs.append(r.json()["ref"])
                if i % (MESSAGES // GHOSTS) == 0:  # reports for refs we never sent
                    body = json.dumps({"ref": f"GHOST{i}", "status": "delivered"}).encode()
                    assert callbacks.post(f"/callbacks/{PROVIDER}", content=body, headers={
                        "X-Signature": body_signature(body, SECRET)}).status_code == 200

            def all_final() -> bool:
                now = states(data_dir)
                return all(now.get(ref, ("", 0))[0] in ("DELIVERED", "FAILED") for ref in refs)

            wait_for(all_final, timeout=60, interval=0.2,
                     message="every message to take the final state reported before it")
            assert sorted(gateway.submitted) == sorted(refs)  # each submitted exactly once
            assert set(gateway.callback_statuses) == {200}
            final = states(data_dir)
            for ref in refs:
                assert final[ref] == (final_of(ref).upper(), T0 + 3000), ref

            sample = api.get(f"/api/messages/{refs[0]}").json()
            history = sorted((h["state"], h["repeats"]) for h in sample["history"])
            assert history == sorted([(final_of(refs[0]).upper(), 1), ("ENROUTE", 0),
                                      ("ACCEPTED", 0)])  # every report kept, the repeat once
            stats = api.get("/api/stats").json()
            assert stats["inbox"]["waiting"] == len(
                [i for i in range(MESSAGES) if i % (MESSAGES // GHOSTS) == 0])
    finally:
        server.stop()
