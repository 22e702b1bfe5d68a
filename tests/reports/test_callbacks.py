"""``/callbacks/{provider}`` against a real server: stored first, answered 2xx, applied
right (DLR-2..7, 11), with hostile input."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance import __version__
from tests.harness import (
    FileClock,
    Server,
    create_account,
    db_read,
    run_cli,
    wait_for,
)
from tests.ops.load import ReportFlood
from tests.reports.support import (
    add_account,
    add_message,
    http_provider_config,
    inbox_rows,
    message,
    post_report,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000


Clock = FileClock


@pytest.fixture
def clock(tmp_path: Path) -> Clock:
    return Clock(tmp_path / "clock", T0)


@pytest.fixture
def gw_server(data_dir: Path, tmp_path: Path, clock: Clock) -> Iterator[Server]:
    srv = Server(data_dir, config=http_provider_config(tmp_path / "appliance.toml"),
                 env={"APPLIANCE_CLOCK_FILE": str(clock.path)}).start()
    try:
        yield srv
    finally:
        srv.stop()


def db(server: Server, readonly: bool = True) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    conn = apsw.Connection(str(server.data_dir / "appliance.db"), flags=flags)
    conn.set_busy_timeout(5000)
    return conn


def read(server: Server, fn: Any) -> Any:
    return db_read(server.data_dir, fn)


def write(server: Server, fn: Any) -> Any:
    """A commit from another process, as a message the sender wrote would appear."""
    conn = db(server, readonly=False)
    try:
        # IMMEDIATE: a read-then-write transaction beside the live writer would get
        # SQLITE_BUSY (snapshot out of date) at once, whatever the busy timeout.
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return out
    finally:
        conn.close()


def iso(ms: int) -> str:
    from appliance.clock import iso as render

    out = render(ms)
    assert out is not None
    return out


@pytest.mark.usefixtures("backend")
def test_a_report_for_an_unknown_ref_is_answered_2xx_and_survives_kill_9(
        gw_server: Server) -> None:
    with gw_server.client() as client:
        r = post_report(client, {"ref": "NEVER-SEEN", "status": "delivered",
                                 "reported_at": iso(T0)})
    assert r.status_code == 200
    # The line the field note greps for, with the ref, so the count can be checked.
    unknown = [json.loads(line) for line in gw_server.log().splitlines()
               if '"unknown report"' in line]
    assert [u["ref"] for u in unknown] == ["NEVER-SEEN"]
    gw_server.kill9()  # a 2xx means it is on disk
    gw_server.restart()
    rows = read(gw_server, lambda c: inbox_rows(c, "NEVER-SEEN"))
    assert [(r["state"], r["applied_at"]) for r in rows] == [("DELIVERED", None)]
    key = create_account(gw_server.data_dir)
    with gw_server.client(key) as api:
        assert api.get("/api/stats").json()["inbox"]["waiting"] == 1


def test_a_burst_of_unknown_reports_is_one_line_and_one_sum_not_a_line_each(
        gw_server: Server) -> None:
    with gw_server.client() as client:
        for i in range(60):
            assert post_report(client, {"ref": f"BURST-{i}", "status": "delivered",
                                        "reported_at": iso(T0)}).status_code == 200
    assert gw_server.terminate() == 0  # the summary of the open interval is written on stop
    unknown = [json.loads(line) for line in gw_server.log().splitlines()
               if '"unknown report"' in line]
    assert len(unknown) <= 3, unknown
    assert unknown[0]["ref"] == "BURST-0" and unknown[0]["count"] == 1
    # Adding up the counts still gives every report left waiting.
    assert sum(u["count"] for u in unknown) == 60
    assert all(u["provider"] == "gw" for u in unknown)


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_kill_9_during_a_report_flood_loses_no_acknowledged_report(
        data_dir: Path, tmp_path: Path) -> None:
    srv = Server(data_dir, config=http_provider_config(tmp_path / "appliance.toml")).start()
    flood = ReportFlood(srv, threads=6).start()
    try:
        wait_for(lambda: flood.count() > 300, 30, message="the flood to build up")
        srv.kill9()
    finally:
        flood.stop()
    acked = {ref for _, ref in flood.acked}
    stored = {r["ref"] for r in read(srv, inbox_rows)}
    assert acked <= stored, f"{len(acked - stored)} acknowledged reports lost"
    srv.restart()
    srv.stop()


def test_the_reconciler_applies_a_waiting_report_once_the_message_is_there(
        gw_server: Server, clock: Clock) -> None:
    with gw_server.client() as client:
        assert post_report(client, [
            {"ref": "R1", "status": "delivered", "reported_at": iso(T0 + 2000)},
            {"ref": "R1", "status": "enroute", "reported_at": iso(T0 + 1000)},
        ]).status_code == 200

    def commit_message(c: apsw.Connection) -> None:
        add_message(c, add_account(c), "R1", created_at=T0, submitted_at=T0)

    write(gw_server, commit_message)
    assert read(gw_server, lambda c: message(c, "R1"))["state"] == "SUBMITTED"
    clock.set(T0 + 1000)  # the first retry is due one second after receipt
    wait_for(lambda: read(gw_server, lambda c: message(c, "R1"))["state"] == "DELIVERED",
             timeout=15, message="the reconciler to apply the waiting report")
    rows = read(gw_server, lambda c: inbox_rows(c, "R1"))
    assert sorted(r["outcome"] for r in rows) == ["APPLIED", "STALE"]


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that only send hostile callbacks (each checks its own
    rows), so the suite does not pay a start per case."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "data").mkdir()
    srv = Server(root / "data", config=http_provider_config(root / "appliance.toml")).start()
    try:
        yield srv
    finally:
        srv.stop()


def raw_rows(server: Server, body: bytes) -> list[tuple[int, int]]:
    """(id, parsed) of the raw callbacks stored with exactly this body."""
    rows: list[tuple[int, int]] = read(server, lambda c: [(int(r[0]), int(r[1])) for r in
                                                         c.execute(
        "SELECT id, parsed FROM raw_reports WHERE body = ?", (body,))])
    return rows


def test_a_forged_report_is_401_and_not_stored(shared_server: Server) -> None:
    body = json.dumps({"ref": "FORGED", "status": "delivered"}).encode()
    with shared_server.client() as client:
        assert post_report(client, body, secret="wrong").status_code == 401
        assert client.post("/callbacks/gw", content=body,
                           headers={"Content-Type": "application/json"}).status_code == 401
        assert client.get("/callbacks/gw").status_code == 401  # http kind signs bodies
    assert raw_rows(shared_server, body) == []
    assert read(shared_server, lambda c: inbox_rows(c, "FORGED")) == []


UNREADABLE = [
    b"not json at all",
    b'{"ref": "X", "status": "exploded"}',
    b'{"status": "delivered"}',
    b"\xff\xfe\x00garbage",
    b'[{"ref": "X", "status": "delivered"}, 7]',
    b"[" * 5000,
    b"",
]


def test_an_authentic_callback_that_cannot_be_read_is_kept_raw_and_answered_2xx(
        shared_server: Server) -> None:
    with shared_server.client() as client:
        for body in UNREADABLE:
            assert post_report(client, body).status_code == 200, body
    for body in UNREADABLE:
        [(raw_id, parsed)] = raw_rows(shared_server, body)
        assert parsed == 0
        assert read(shared_server, lambda c, i=raw_id: c.execute(
            "SELECT count(*) FROM report_inbox WHERE raw_id = ?", (i,)).fetchone()[0]) == 0


def test_unknown_provider_oversized_body_repeats_and_batches(shared_server: Server) -> None:
    with shared_server.client() as client:
        assert post_report(client, {"ref": "X", "status": "delivered"},
                           provider="nope").status_code == 404
        huge = json.dumps({"ref": "HUGE", "status": "delivered", "pad": "x" * 300_000})
        assert post_report(client, huge.encode()).status_code == 413
        one = {"ref": "DUP", "status": "failed", "reported_at": iso(T0), "error_code": "34"}
        for _ in range(3):
            assert post_report(client, one).status_code == 200
        batch = [{"ref": f"BATCH{i}", "status": "delivered"} for i in range(20)]
        assert post_report(client, batch).status_code == 200
    assert read(shared_server, lambda c: inbox_rows(c, "HUGE")) == []
    [dup] = read(shared_server, lambda c: inbox_rows(c, "DUP"))
    assert (dup["repeats"], dup["error_code"]) == (2, "34")
    batched = read(shared_server, lambda c: c.execute(
        "SELECT count(*) FROM report_inbox WHERE ref LIKE 'BATCH%'").fetchone()[0])
    assert batched == 20


def test_stats_need_a_key(shared_server: Server) -> None:
    with shared_server.client() as client:
        assert client.get("/api/stats").status_code == 401
    with shared_server.client("nope") as client:
        assert client.get("/api/stats").status_code == 401


def test_cut_off_moves_a_silent_message_to_unknown_and_a_late_report_still_lands(
        gw_server: Server, clock: Clock) -> None:
    def commit_message(c: apsw.Connection) -> None:
        add_message(c, add_account(c), "SILENT", created_at=T0, submitted_at=T0)

    write(gw_server, commit_message)
    assert run_cli("doctor", "--data-dir", str(gw_server.data_dir),
                   env={"APPLIANCE_CLOCK_FILE": str(clock.path)}, check=False).returncode == 0
    clock.set(T0 + 73 * HOUR)  # past the 72 h delivery window
    wait_for(lambda: read(gw_server, lambda c: message(c, "SILENT"))["state"] == "UNKNOWN",
             timeout=15, message="the cut-off")
    doctor = run_cli("doctor", "--data-dir", str(gw_server.data_dir),
                     env={"APPLIANCE_CLOCK_FILE": str(clock.path)}, check=False)
    assert doctor.returncode == 1 and "ALERT overdue" in doctor.stdout

    with gw_server.client() as client:
        post_report(client, {"ref": "SILENT", "status": "delivered", "reported_at": iso(T0)})
    assert read(gw_server, lambda c: message(c, "SILENT"))["state"] == "DELIVERED"


class Webhook:
    """A local receiver for alert notifications."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.user_agents: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                outer.user_agents.append(self.headers.get("user-agent", ""))
                outer.received.append(json.loads(self.rfile.read(size)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_stale_inbox_raises_the_alert_and_calls_the_webhook(
        data_dir: Path, tmp_path: Path, clock: Clock) -> None:
    hook = Webhook()
    srv = Server(data_dir, config=http_provider_config(tmp_path / "a.toml"), env={
        "APPLIANCE_CLOCK_FILE": str(clock.path),
        "APPLIANCE_ALERTS_WEBHOOK_URL": hook.url,
        "APPLIANCE_ALERTS_CHECK_INTERVAL_S": "0.2",
    }).start()
    try:
        with srv.client() as client:
            post_report(client, {"ref": "NOBODY", "status": "delivered"})
        clock.set(T0 + 2 * HOUR)  # older than inbox_oldest_max_s (1 h)
        alert = wait_for(lambda: next((a for a in hook.received
                                       if a["name"] == "inbox_stale"), None), timeout=15,
                         message="the inbox_stale notification")
        assert alert["firing"] is True and alert["value"] >= 7200
        assert set(hook.user_agents) == {f"appliance/{__version__}"}
        key = create_account(data_dir)
        with srv.client(key) as api:
            stats = api.get("/api/stats").json()
        assert {a["name"]: a["firing"] for a in stats["alerts"]}["inbox_stale"] is True
        assert stats["inbox"]["oldest_age_s"] >= 7200
    finally:
        srv.stop()
        hook.close()
