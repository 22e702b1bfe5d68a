"""``/metrics``, ``/readyz``, request ids, log redaction, scheduled backups and the
operations alerts (with their webhook)."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from appliance.ops.backup.status import record_failure, record_success
from appliance.ops.observability.alerts import ops_alerts
from appliance.provider_kinds import load_settings
from appliance.store import Store
from tests.harness import Server, create_account, wait_for
from tests.ops.load import numbers
from tests.reports.support import http_provider_config, post_report

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: httpx.Client) -> Samples:
    resp = client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.slow
def test_metrics_parse_and_move_when_work_happens(tmp_path: Path, data_dir: Path) -> None:
    config = http_provider_config(tmp_path / "appliance.toml")
    srv = Server(data_dir, config=config).start()
    key = create_account(data_dir)
    try:
        with srv.client(key) as api:
            before = scrape(api)
            job = int(api.post("/api/contacts/import",
                               json={"list": "m", "text": numbers(0, 3000)}).json()["jobId"])
            wait_for(lambda: api.get(f"/api/jobs/{job}").json()["state"] == "DONE", 60,
                     message="import")
            for i in range(25):
                assert post_report(api, {"ref": f"M-{i}", "status": "delivered",
                                         "reported_at": "2026-01-01T00:00:00Z"}).status_code == 200
            for i in range(30):  # hostile paths must not become label values
                api.get(f"/no/such/{i}/{'x' * i}")
            after = scrape(api)
    finally:
        srv.stop()
    post = dict(route="/api/contacts/import", method="POST", status="202")
    assert value(after, "appliance_http_requests_total", **post) == \
        value(before, "appliance_http_requests_total", **post) + 1
    cb = dict(route="/callbacks/{provider}", method="POST", status="200")
    assert value(after, "appliance_http_requests_total", **cb) == 25
    assert value(after, "appliance_http_requests_total", route="unmatched", method="GET",
                 status="404") == 30
    assert not any("/no/such" in str(k) for k in after)
    assert value(after, "appliance_import_jobs", state="DONE") == \
        value(before, "appliance_import_jobs", state="DONE") + 1
    assert value(after, "appliance_import_rows_total") >= 3000
    assert value(after, "appliance_reports", outcome="WAITING") == 25
    assert value(after, "appliance_inbox_waiting") == 25
    assert value(after, "appliance_raw_callbacks", result="parsed") == 25
    assert value(after, "appliance_writer_commits_total") > \
        value(before, "appliance_writer_commits_total")
    assert value(after, "appliance_writer_commit_seconds_count") > \
        value(before, "appliance_writer_commit_seconds_count")
    for alert in ("coverage_low", "inbox_stale", "overdue", "backup_stale", "import_stuck"):
        assert ("appliance_alert_holding", (("alert", alert),)) in after
    assert value(after, "appliance_alert_holding", alert="backup_stale") == 0
    assert ("appliance_writer_queue_depth", ()) in after
    assert any(k[0] == "appliance_loop_heartbeat_age_seconds" for k in after)


def test_request_ids_and_redacted_logs(tmp_path: Path, data_dir: Path) -> None:
    config = http_provider_config(tmp_path / "appliance.toml")
    srv = Server(data_dir, config=config).start()
    try:
        with srv.client() as client:
            r = client.get("/healthz", headers={"X-Request-Id": "trace-42.a_b"})
            assert r.headers["x-request-id"] == "trace-42.a_b"
            for hostile in ("x" * 129, "a b", "evil\tid", ""):
                r = client.get("/healthz", headers={"X-Request-Id": hostile})
                assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"]), hostile
            r = post_report(client, {"ref": "R-1", "status": "+905321234567",
                                     "reported_at": "2026-01-01T00:00:00Z"})
            assert r.status_code == 200
            rid = r.headers["x-request-id"]
            wait_for(lambda: rid in srv.log(), 10, message="the request's log line")
    finally:
        srv.stop()
    lines = [json.loads(x) for x in srv.log().splitlines() if x.startswith("{")]
    mine = [x for x in lines if x.get("request_id") == rid]
    assert [x["logger"] for x in mine] == ["appliance.callbacks"]
    assert all("+90532*****67" in x["msg"] for x in mine), mine
    assert "+905321234567" not in srv.log()


class Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    Receiver.received = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", Receiver.received
    finally:
        httpd.shutdown()


@pytest.mark.slow
def test_scheduled_backups_keep_n_and_a_failing_backup_shows_everywhere(
        tmp_path: Path, data_dir: Path, webhook: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = webhook
    backups = tmp_path / "backups"
    config = tmp_path / "appliance.toml"
    config.write_text(f'[backup]\ninterval_hours = 0.0005\nkeep = 2\ndir = "{backups}"\n'
                      f'[alerts]\ncheck_interval_s = 0.2\nwebhook_url = "{url}"\n')
    srv = Server(data_dir, config=config).start()
    try:
        with srv.client() as client:
            # Backups keep coming every ~2 s: the files are looked at between two of
            # them (a new one is written before the oldest is pruned).
            wait_for(lambda: srv.log().count('"msg": "backup written"') >= 3
                     and len(list(backups.glob("appliance-*.db"))) == 2
                     and len(list(backups.glob("appliance-*.db.manifest.json"))) == 2, 30,
                     message="three scheduled backups, the oldest pruned with its manifest")
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["backup"]["ok"]
            assert value(scrape(client), "appliance_backup_age_seconds") < 60
    finally:
        srv.stop()

    # Now the backup directory cannot be written: readiness, metrics, alert, webhook.
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    config.write_text(config.read_text().replace(str(backups), str(blocker / "sub")))
    (data_dir / "backup-status.json").unlink()
    received.clear()
    srv.restart()
    try:
        with srv.client() as client:
            resp = wait_for(lambda: (lambda r: r if r.status_code == 503 else None)(
                client.get("/readyz")), 30, message="readyz to fail")
            body = resp.json()
            assert body["checks"]["backup"]["ok"] is False
            assert any(r.startswith("backup: the last backup failed") for r in body["reasons"])
            assert body["checks"]["database"]["ok"] and body["checks"]["scheduler"]["ok"]
            samples = scrape(client)
            assert value(samples, "appliance_backup_last_failed") == 1
            assert value(samples, "appliance_backup_failures_total") >= 1
            assert value(samples, "appliance_alert_holding", alert="backup_stale") == 1
            wait_for(lambda: any(r["name"] == "backup_stale" and r["firing"] for r in received),
                     15, message="the webhook POST")
        with srv.client(create_account(data_dir)) as api:
            shown = {a["name"]: a["firing"] for a in api.get("/api/stats").json()["alerts"]}
            assert shown["backup_stale"] is True and shown["import_stuck"] is False
    finally:
        srv.stop()
    assert "scheduled backup failed" in srv.log()
    hooks = [r for r in received if r["name"] == "backup_stale" and r["firing"]]
    assert len(hooks) == 1, "one POST when the alert starts holding, not one per check"


def test_ops_alerts_on_a_real_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    settings = load_settings(env={}, overrides={
        "data_dir": str(data), "backup": {"interval_hours": 1.0},
        "import": {"stuck_after_s": 60.0}})
    store = Store.open(str(settings.db_path))
    now = 10_000_000_000
    try:
        store.writer.call(lambda c: c.execute(
            "INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
            "INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0);"
            "INSERT INTO import_jobs (id, account_id, list_id, idempotency_key, payload_sha256,"
            " region, state, total, created_at, updated_at) VALUES"
            f" (7, 1, 1, 'k7', 'x', 'TR', 'RUNNING', 10, 0, {now - 61_000}),"
            f" (8, 1, 1, 'k8', 'x', 'TR', 'RUNNING', 10, 0, {now - 59_000}),"
            f" (9, 1, 1, 'k9', 'x', 'TR', 'DONE', 10, 0, {now - 999_000})"))

        def alerts() -> dict[str, Any]:
            return {a.name: a for a in store.readers.call(
                lambda c: ops_alerts(c, settings, now))}

        got = alerts()
        assert got["import_stuck"].firing and got["import_stuck"].value == 1
        assert ": 7" in got["import_stuck"].message
        assert not got["backup_stale"].firing  # no backup yet and no failure
        record_success(data, now - 4_400_000, data / "b.db", 1, 0.1)  # 1.22 h ago
        assert not alerts()["backup_stale"].firing
        record_success(data, now - 4_600_000, data / "b.db", 1, 0.1)  # 1.28 h ago
        assert alerts()["backup_stale"].firing
        record_success(data, now - 1000, data / "b.db", 1, 0.1)
        assert not alerts()["backup_stale"].firing
        record_failure(data, now, "disk full")
        stale = alerts()["backup_stale"]
        assert stale.firing and "disk full" in stale.message
        (data / "backup-status.json").write_text("{not json")
        assert not alerts()["backup_stale"].firing  # unreadable status: as if none yet
    finally:
        store.close()
