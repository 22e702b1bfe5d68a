"""The report intake's process (``[reports] intake_port``) against a real server:
every ``2xx`` on disk, the same refusals as the server's own route, and each process
killed in turn (DLR-2, EDGE-1, 2)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.config import ConfigError
from appliance.provider_kinds import load_settings
from tests.edge.support import edge_config, raw_request, signed_callback, status_and_json
from tests.harness import Server, db_rows, free_port, run_cli, wait_for
from tests.reports.support import post_report


def intake_config(path: Path, port: int) -> Path:
    return edge_config(path, extra=f"\n[reports]\nintake_port = {port}\n")


class Intake:
    """A server with a report intake, and the intake's own client."""

    def __init__(self, root: Path) -> None:
        (root / "data").mkdir(exist_ok=True)
        self.port = free_port()
        self.server = Server(root / "data", config=intake_config(root / "a.toml", self.port))
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Intake:
        self.server.start()
        self.wait_up()
        return self

    def wait_up(self) -> None:
        def up() -> bool | None:
            try:
                return httpx.post(self.url + "/callbacks/gw", timeout=2).status_code == 401
            except httpx.TransportError:
                return None
        wait_for(up, 30, message="the report intake to answer")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def pids(self) -> list[int]:
        """The intake processes the server started, in order (from its log)."""
        found = []
        for line in self.server.log().splitlines():
            if '"report intake started"' in line:
                found.append(int(json.loads(line)["pid"]))
        return found

    def stored(self, like: str) -> int:
        return int(db_rows(self.server.data_dir,
                           "SELECT count(*) FROM report_inbox WHERE ref LIKE ?", (like,))[0][0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone as far as the port goes.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(") ", 1)[1][0] != "Z"
    return True


@pytest.fixture(scope="module")
def intake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Intake]:
    """One server for the tests that do not kill anything."""
    running = Intake(tmp_path_factory.mktemp("intake")).start()
    try:
        yield running
    finally:
        running.server.stop()


def flood(intake: Intake, prefix: str, count: int, threads: int = 8,
          stop: threading.Event | None = None) -> list[tuple[str, int]]:
    """POST signed reports from several threads: (ref, status) of each answered one."""
    answered: list[tuple[str, int]] = []
    lock = threading.Lock()

    def run(worker: int) -> None:
        with intake.client() as client:
            for i in range(worker, count, threads):
                if stop is not None and stop.is_set():
                    return
                ref = f"{prefix}-{i}"
                try:
                    status = signed_callback(client, ref).status_code
                except httpx.TransportError:
                    continue  # no answer: nothing was promised
                with lock:
                    answered.append((ref, status))

    workers = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return answered


class Flood:
    """Signed reports sent from threads in the background until :meth:`finish`, once
    ``at_least`` of them are stored."""

    def __init__(self, intake: Intake, prefix: str, at_least: int, threads: int = 4) -> None:
        self.intake, self.prefix = intake, prefix
        self.stop = threading.Event()
        self.answered: list[tuple[str, int]] = []
        self.sender = threading.Thread(target=lambda: self.answered.extend(
            flood(intake, prefix, 100_000, threads=threads, stop=self.stop)))
        self.sender.start()
        wait_for(lambda: intake.stored(f"{prefix}-%") >= at_least or None, 30)

    def finish(self) -> tuple[set[str], set[str]]:
        """(refs answered 2xx, refs on disk)."""
        self.stop.set()
        self.sender.join()
        ok = {ref for ref, status in self.answered if status == 200}
        stored = {r[0] for r in db_rows(self.intake.server.data_dir,
                                        "SELECT ref FROM report_inbox WHERE ref LIKE ?",
                                        (f"{self.prefix}-%",))}
        return ok, stored


def test_every_2xx_from_the_intake_port_is_on_disk_after_kill_9(tmp_path: Path) -> None:
    running = Intake(tmp_path).start()
    flooding = Flood(running, "ONDISK", 200, threads=8)
    running.server.kill9()  # mid-flood: some callbacks are in the writer's batch
    ok, refs = flooding.finish()
    assert len(ok) >= 200
    assert {status for _, status in flooding.answered} <= {200, 503}
    assert ok <= refs
    # The server gone, its intake goes too: the port is free for the next start.
    child = running.pids()[-1]
    wait_for(lambda: not alive(child) or None, 10, message="the intake to exit")
    running.server.restart()
    running.wait_up()
    with running.client() as client:
        assert signed_callback(client, "AFTER-RESTART").status_code == 200
    assert running.stored("AFTER-RESTART") == 1
    running.server.stop()


def test_the_intake_refuses_as_the_servers_own_route_does(intake: Intake) -> None:
    srv = intake.server
    with intake.client() as ours, srv.client() as theirs:
        for client in (ours, theirs):
            forged = post_report(client, {"ref": "FORGED-1", "status": "delivered"},
                                 secret="wrong")
            assert forged.status_code == 401, forged.text
            assert forged.json()["error"] == "unauthorized"
            assert "WWW-Authenticate" not in forged.headers
            nobody = client.post("/callbacks/nobody")
            assert nobody.status_code == 404 and nobody.json()["error"] == "not_found"
            big = client.post("/callbacks/gw", content=b"x" * (256 * 1024 + 1))
            assert big.status_code == 413 and big.json()["error"] == "payload_too_large"
            assert client.get("/callbacks/gw").status_code == 401  # GET is a callback too
        assert intake.stored("FORGED-%") == 0
        other = ours.get("/api/jobs")
        assert other.status_code == 404 and other.json()["error"] == "not_found"
        put = ours.put("/callbacks/gw", content=b"{}")
        assert put.status_code == 405 and put.headers["Allow"] == "GET, POST"
        answer = signed_callback(ours, "ECHO-1")
        assert answer.status_code == 200 and answer.headers["X-Request-Id"]
        mine = ours.post("/callbacks/nobody", headers={"X-Request-Id": "trace-me-1"})
        assert mine.headers["X-Request-Id"] == "trace-me-1"


def test_the_intake_port_holds_the_edge_limits(intake: Intake) -> None:
    big = b"POST /callbacks/gw HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    status, body = status_and_json(raw_request(intake.port, big))
    assert status == 431 and body["error"] == "headers_too_large"
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", intake.port), timeout=10) as sock:
        sock.sendall(b"POST /callbacks/gw HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        answer = b""
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            while piece := sock.recv(65536):
                answer += piece
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert time.monotonic() - started < 8
    with intake.client() as client:  # and the port still answers
        assert signed_callback(client, "AFTER-SLOW").status_code == 200

    def refusals() -> dict[str, float] | None:  # the server's own port refused nothing
        text = httpx.get(intake.server.url + "/metrics", timeout=10).text
        found = {line.split('"')[1]: float(line.split()[-1]) for line in text.splitlines()
                 if line.startswith("appliance_http_edge_refusals_total{")}
        ok = found.get("headers_too_large", 0) >= 1 and found.get("request_timeout", 0) >= 1
        return found if ok else None

    wait_for(refusals, 10, message="the intake's edge refusals in /metrics")


def test_the_intake_requests_are_counted_in_the_servers_metrics(intake: Intake) -> None:
    with intake.client() as client:
        for i in range(3):
            assert signed_callback(client, f"COUNTED-{i}").status_code == 200

    def counted() -> str | None:
        text = httpx.get(intake.server.url + "/metrics", timeout=10).text
        lines = [line for line in text.splitlines() if line.startswith(
            'appliance_http_requests_total{method="POST",route="/callbacks/{provider}"'
            ',status="200"}')]
        return text if lines and float(lines[0].split()[-1]) >= 3 else None

    text = wait_for(counted, 10, message="the intake's requests in /metrics")
    assert "appliance_report_intake_up 1.0" in text


def test_a_killed_intake_is_started_again_on_the_same_port(tmp_path: Path) -> None:
    running = Intake(tmp_path).start()
    try:
        first = running.pids()[0]
        flooding = Flood(running, "KILLED", 50)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: len(running.pids()) >= 2 or None, 20,
                 message="a new intake process")
        running.wait_up()
        with running.client() as client:
            assert signed_callback(client, "AFTER-KILL").status_code == 200
        ok, refs = flooding.finish()
        assert ok <= refs and len(ok) >= 50
        metrics = httpx.get(running.server.url + "/metrics", timeout=10).text
        assert "appliance_report_intake_restarts_total 1.0" in metrics
        assert "report intake process exited" in running.server.log()
    finally:
        running.server.stop()


def test_sigterm_drains_the_intake_and_every_2xx_is_on_disk(tmp_path: Path) -> None:
    running = Intake(tmp_path).start()
    child = running.pids()[0]
    flooding = Flood(running, "DRAIN", 50)
    assert running.server.terminate() == 0
    ok, refs = flooding.finish()
    assert not alive(child)
    assert ok <= refs and len(ok) >= 50
    assert "stopped cleanly" in running.server.log()


def test_callback_urls_name_the_intake_port_unless_a_public_url_is_set(tmp_path: Path) -> None:
    cfg = intake_config(tmp_path / "a.toml", 9099)
    settings = load_settings(cfg, env={}, overrides={"data_dir": str(tmp_path)})
    assert settings.callback_url("gw") == "http://127.0.0.1:9099/callbacks/gw"
    assert settings.callback_base == f"http://127.0.0.1:{settings.port}"
    public = load_settings(cfg, env={}, overrides={"data_dir": str(tmp_path),
                                                   "public_url": "https://sms.example.com/"})
    assert public.callback_url("gw") == "https://sms.example.com/callbacks/gw"


@pytest.mark.parametrize(("value", "says"), [
    ("70000", "is not a TCP port"), ("-1", "must not be negative"),
    ("SAME", "the server's own port"),
])
def test_a_bad_intake_port_is_refused_at_start(tmp_path: Path, value: str, says: str) -> None:
    port = free_port()
    (tmp_path / "a.toml").write_text(
        f"port = {port}\n[reports]\nintake_port = {port if value == 'SAME' else value}\n")
    with pytest.raises(ConfigError, match=says):
        load_settings(tmp_path / "a.toml", env={}, overrides={"data_dir": str(tmp_path)})
    done = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--config",
                   str(tmp_path / "a.toml"), check=False)
    assert done.returncode == 2 and says in done.stderr


def test_an_intake_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        cfg = intake_config(tmp_path / "a.toml", taken)
        done = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--config", str(cfg),
                       "--port", str(free_port()), check=False)
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{taken}" in done.stderr
    assert "[reports] intake_port" in done.stderr
    assert not (tmp_path / "d" / "appliance.db").exists()
