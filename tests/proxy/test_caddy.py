"""A real Caddy, running the Caddyfile ``appliance proxy-config caddy`` prints, in front of
a real ``appliance serve`` with its report intake: what a client of Caddy sees."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.edge.support import status_and_json
from tests.harness import Server, create_account, db_rows, free_port, wait_for
from tests.proxy.support import PUBLIC, printed_config
from tests.proxy.test_nginx import (
    MAX_BYTES,
    MAX_ROWS,
    in_pieces,
    numbers,
    request_head,
    send_streamed,
    write_config,
)
from tests.reports.support import post_report

CADDY = shutil.which("caddy")
pytestmark = pytest.mark.skipif(
    not CADDY, reason="caddy is not installed (Debian package `caddy`; .ci/run installs it)")


class CaddyStack:
    def __init__(self, root: Path) -> None:
        (root / "data").mkdir(parents=True)
        self.intake_port = free_port()
        self.server = Server(root / "data", config=root / "appliance.toml")
        self.config = write_config(root / "appliance.toml", self.server.port,
                                   self.intake_port, f"https://{PUBLIC}")
        self.port = free_port()
        text = printed_config(self.config, "caddy", "--listen", f"127.0.0.1:{self.port}")
        # The tests' one change: no admin endpoint (its fixed port 2019 is shared).
        self.caddyfile = root / "Caddyfile"
        self.caddyfile.write_text(text.replace("{\n\tservers {", "{\n\tadmin off\n\tservers {", 1))
        self.root = root
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CaddyStack:
        self.server.start()
        assert CADDY is not None
        env = {"HOME": str(self.root), "XDG_DATA_HOME": str(self.root / "data-home"),
               "XDG_CONFIG_HOME": str(self.root / "config-home"), "PATH": "/usr/bin:/bin"}
        with open(self.root / "caddy.log", "wb") as log:
            self.proc = subprocess.Popen([CADDY, "run", "--config", str(self.caddyfile),
                                          "--adapter", "caddyfile"], env=env,
                                         stdout=log, stderr=subprocess.STDOUT)

        def listening() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError((self.root / "caddy.log").read_text())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for(listening, 20, message="caddy to listen")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.server.stop()


@pytest.fixture(scope="module")
def caddy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CaddyStack]:
    running = CaddyStack(tmp_path_factory.mktemp("caddy")).start()
    try:
        yield running
    finally:
        running.stop()


def test_through_caddy_a_paste_is_accepted_and_the_limits_answer_as_ours(
        caddy: CaddyStack) -> None:
    key = create_account(caddy.server.data_dir)
    text = "".join(f"+9053{i:08d}\n" for i in range(20_000))
    with httpx.Client(base_url=f"http://127.0.0.1:{caddy.port}", timeout=60,
                      headers={"Authorization": f"Bearer {key}", "Host": PUBLIC}) as client:
        body = json.dumps({"list": "pasted", "text": text, "region": "TR"}).encode()
        answer = client.post("/api/contacts/import", content=body,
                             headers={"Content-Type": "application/json"})
        assert answer.status_code == 202, answer.text
    # Just past our limit: ours, before the client has sent it all.
    size = MAX_BYTES + 1000
    head = request_head("/api/contacts/import?list=big&region=TR", key, "text/plain", size)
    reply, sent = send_streamed(caddy.port, head, in_pieces(numbers(size // 14 + 1)))
    status, refused = status_and_json(reply)
    assert (status, refused["error"], refused["limit"]) == (413, "payload_too_large", MAX_BYTES)
    assert str(refused["message"]).startswith("the list is larger") and sent < size
    # Rows: refused while the body streams through Caddy.
    lines = 2_000_000
    total = 14 * lines
    head = request_head("/api/contacts/import?list=huge&region=TR", key, "text/plain", total)
    reply, sent = send_streamed(caddy.port, head, in_pieces(numbers(lines)))
    status, refused = status_and_json(reply)
    assert (status, refused["error"], refused["at_least"]) == (413, "too_many_rows", True)
    assert refused["limit"] == MAX_ROWS and sent < total


def test_through_caddy_signed_callbacks_reach_the_intake(caddy: CaddyStack) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{caddy.port}", timeout=30,
                      headers={"Host": PUBLIC}) as client:
        answer = post_report(client, {"ref": "CADDY1", "status": "delivered",
                                      "reported_at": "2026-01-01T00:00:00Z"})
        assert answer.status_code in (200, 202, 204), answer.text
    assert db_rows(caddy.server.data_dir, "SELECT count(*) FROM report_inbox WHERE ref = ?",
                   ("CADDY1",)) == [(1,)]
