"""``appliance migrate --to``: a data dir with every table written by the real paths
(imports, messages, a campaign and its reports, suppressions, inbound messages, keys,
sign-ins) is copied into PostgreSQL, every count verified and printed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest

from appliance.reports.pull_schedule import queue_now
from appliance.sending.outcomes import _MAP_ID
from appliance.sending.resolution import resolve_message
from appliance.store import Store, rollups
from appliance.store.pg import PgConnection
from appliance.store.schema import migrate as migrate_sqlite
from appliance.store.transfer import TransferRefused, copy_to_postgresql
from tests.harness import Server, create_account, run_cli, wait_for
from tests.sending.support import SimulatorProcess, provider_config, send, wait_state
from tests.web.console_support import create_user, csrf_of, sign_in

LINES = "\n".join(["msisdn,name", *[f"+90532100{i:04d},Name {i}" for i in range(40)],
                   "not a number", "+90532100" + "0001,again"])


def populate(tmp: Path, data_dir: Path) -> str:
    """Every table of the schema gets rows, through the server's own routes; returns the
    account's API key."""
    sim = SimulatorProcess(tmp).start()
    try:
        key = create_account(data_dir, "acme")
        create_user(data_dir, "alice", "acme")
        # An account with a receiver of its own (TEAM-2).
        create_account(data_dir, "beta")
        run_cli("account", "webhook", "beta", "--url", "http://127.0.0.1:9/beta",
                "--secret", "beta-secret", "--data-dir", str(data_dir))
        # A key with a daily allowance: the campaign through it moves key_daily_counts.
        limited = run_cli("key", "create", "--account", "acme", "--daily-limit", "1000",
                          "--data-dir", str(data_dir)).stdout.strip().splitlines()[-1]
        # Webhooks on (to a receiver that is not there): the outbox gets rows too.
        config = provider_config(tmp / "appliance.toml", sim.url, extra=(
            '\n[webhooks]\nurl = "http://127.0.0.1:9/events"\nsecret = "migrate-test"\n'))
        server = Server(data_dir, config=config).start()
        try:
            with server.client(key) as api:
                job = api.post("/api/contacts/import", json={"list": "people", "text": LINES,
                                                             "region": "TR"})
                assert job.status_code == 202, job.text
                wait_for(lambda: api.get(f"/api/jobs/{job.json()['jobId']}").json()["state"]
                         == "DONE", 30, message="the import")
                assert api.post("/api/suppressions", json={
                    "msisdn": "+905321000039", "reason": "asked"}).status_code in (200, 201)
                assert api.post("/api/consents", json={  # a consent and its history
                    "msisdn": "+905321000040", "status": "ONAY",
                    "recipient_type": "BIREYSEL"}).status_code == 201
                with server.client(limited) as charged:
                    campaign = charged.post("/api/campaigns", json={"list": "people",
                                                                    "body": "hi"})
                assert campaign.status_code == 202, campaign.text
                ref = send(api, "+905321009999", "a long one " * 20)  # parts
                # The simulator delivers most, fails some: any final report will do.
                wait_state(api, ref, "DELIVERED", "FAILED", "EXPIRED", "REJECTED", timeout=60)
                cid = campaign.json()["campaignId"]
                wait_for(lambda: api.get(f"/api/campaigns/{cid}").json().get("state") == "DONE",
                         60, message="the campaign")
                inbound = httpx.post(sim.url + "/_sim/inbound", timeout=30, json={
                    "from": "+905321000007", "text": "STOP please", "parts": 2,
                    "url": f"{server.url}/inbound/sim"})
                assert inbound.status_code == 200, inbound.text
            with server.client() as guess:  # a failed sign-in is counted
                form = guess.get("/login")
                assert guess.post("/login", data={
                    "csrf_token": csrf_of(form.text), "username": "alice",
                    "password": "not the password"}).status_code == 401
            with sign_in(server) as console:
                assert console.get("/lists").status_code == 200
            assert httpx.get(server.url + "/readyz", timeout=30).status_code == 200
        finally:
            server.stop()
    finally:
        sim.stop()
    # No configured kind maps its ids today (each echoes our ref): the sender's own
    # statement records one mapping, as it does for a provider that reports by its id.
    # An operator's decision on an UNCERTAIN message (OPS-6), as the resolve route makes it.
    store = Store.open(str(data_dir / "appliance.db"))
    try:
        store.writer.call(lambda c: c.execute(_MAP_ID, ("sim", "SIM-ID-1", "ref-1", 1)))

        def decide(c: Any) -> None:
            row = c.execute("SELECT id FROM messages WHERE campaign_id IS NULL").fetchone()
            c.execute("UPDATE messages SET state = 'UNCERTAIN' WHERE id = ?", (row[0],))
            resolve_message(c, int(row[0]), "mark_failed", "test", 1)

        store.writer.call(decide)
        # A message's next ask queued, as POST /api/messages/{ref}/pull does (ROUTE-2).
        def queue(c: Any) -> None:
            first = c.execute("SELECT min(id) FROM messages").fetchone()
            queue_now(c, int(first[0]), "sim", 1)

        store.writer.call(queue)
        # The kept counts move into message_counts as the rollups loop would.
        store.writer.call(lambda c: rollups.fold(c, 10**6))
    finally:
        store.close()
    return key


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("migrate")
    data_dir = tmp / "data"
    data_dir.mkdir()
    populate(tmp, data_dir)
    return data_dir


def sqlite_rows(data_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{data_dir / 'appliance.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_every_table_is_copied_and_verified(populated: Path, pg_url: str) -> None:
    tables = [r[0] for r in sqlite_rows(populated, "SELECT name FROM sqlite_schema"
                                        " WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    counts = {t: sqlite_rows(populated, f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    empty = sorted(t for t, n in counts.items() if n == 0)
    assert empty == [], f"the data dir should have rows in every table: {empty} are empty"

    out = run_cli("migrate", "--data-dir", str(populated), "--to", pg_url)
    for table, n in counts.items():  # one line per table, both counts printed
        assert any(line.split()[:1] == [table] and f"{n:,} rows in SQLite" in line
                   and line.rstrip().endswith(f"{n:,} in PostgreSQL")
                   for line in out.stdout.splitlines()), (table, out.stdout)
    assert "every table's count verified" in out.stdout
    assert "rows (100%)" in out.stderr  # the progress

    conn = PgConnection.connect(pg_url)
    try:
        for table, n in counts.items():
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (n,), table
        # A few rows, column for column.
        for table, order in (("messages", "id"), ("report_inbox", "id"),
                             ("import_jobs", "id"), ("inbound_messages", "id"),
                             ("message_parts", "message_id, part"), ("api_keys", "id")):
            assert conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall() == \
                sqlite_rows(populated, f"SELECT * FROM {table} ORDER BY {order}"), table
        payload = conn.execute("SELECT body FROM import_payloads").fetchone()[0]
        assert payload == sqlite_rows(populated, "SELECT body FROM import_payloads")[0][0]
        # The identities go on past the copied ids (import_jobs: past any id ever given).
        highest = sqlite_rows(populated, "SELECT max(id) FROM accounts")[0][0]
        conn.execute("INSERT INTO accounts (name, created_at) VALUES ('new', 0)")
        assert conn.last_insert_rowid() == highest + 1
    finally:
        conn.close()

    again = run_cli("migrate", "--data-dir", str(populated), "--to", pg_url, check=False)
    assert again.returncode == 1
    assert "not empty" in again.stderr


def test_a_failed_copy_leaves_the_target_empty(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "appliance.db"
    migrate_sqlite(str(path))
    lite = sqlite3.connect(path)
    lite.execute("INSERT INTO accounts (name, created_at) VALUES ('a', 0)")
    lite.execute("INSERT INTO accounts (name, created_at) VALUES (?, 0)", ("nul\x00inside",))
    lite.commit()
    lite.close()
    with pytest.raises(TransferRefused, match="NUL"):
        copy_to_postgresql(path, pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables"
                            " WHERE schemaname = current_schema()").fetchone() == (0,)


def test_migrate_refuses_while_the_server_runs_and_without_a_database(
        tmp_path: Path, pg_url: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    missing = run_cli("migrate", "--data-dir", str(data_dir), "--to", pg_url, check=False)
    assert missing.returncode == 1 and "no database" in missing.stderr
    bad = run_cli("migrate", "--data-dir", str(data_dir), "--to", "mysql://h/db", check=False)
    assert bad.returncode == 2 and "postgresql://" in bad.stderr
    server = Server(data_dir).start()
    try:
        busy = run_cli("migrate", "--data-dir", str(data_dir), "--to", pg_url, check=False)
        assert busy.returncode == 1 and "stop it first" in busy.stderr
    finally:
        server.stop()


# Figures that move with the clock between two reads, not with the data.
_MOVING = ("messages_per_s", "eta_s", "age_s", "oldest_age_s", "now")


def _steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in _MOVING}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def api_answers(server: Server, key: str, refs: list[str], numbers: list[str]
                ) -> dict[str, Any]:
    """What the API says about everything the data dir holds."""
    with server.client(key) as api:
        def get(path: str) -> Any:
            r = api.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text)
            return r.json()

        out: dict[str, Any] = {}
        for path in ("/api/jobs", "/api/lists", "/api/lists/people", "/api/campaigns",
                     "/api/suppressions", "/api/inbound"):
            out[path] = get(path)
        for number in numbers:
            out[f"messages to {number}"] = get(f"/api/messages?msisdn={quote(number)}")
        for job in out["/api/jobs"]["jobs"]:
            out[f"job {job['jobId']}"] = get(f"/api/jobs/{job['jobId']}")
        for c in out["/api/campaigns"]["campaigns"]:
            out[f"campaign {c['id']}"] = get(f"/api/campaigns/{c['id']}")
        for ref in refs:
            out[f"message {ref}"] = get(f"/api/messages/{ref}")
        steady: dict[str, Any] = _steady(out)
        return steady


def test_after_migrate_the_api_answers_the_same_from_postgresql(
        tmp_path: Path, pg_url: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    key = populate(tmp_path, data_dir)
    rows = sqlite_rows(data_dir, "SELECT ref, msisdn FROM messages ORDER BY id")
    refs, numbers = [r[0] for r in rows], sorted({r[1] for r in rows})[:5]
    on_sqlite = Server(data_dir).start()
    try:
        before = api_answers(on_sqlite, key, refs, numbers)
    finally:
        on_sqlite.stop()
    run_cli("migrate", "--data-dir", str(data_dir), "--to", pg_url)
    # The SQLite file out of the way: whatever answers now comes from PostgreSQL.
    for path in data_dir.glob("appliance.db*"):
        path.rename(tmp_path / path.name)
    on_postgresql = Server(data_dir, env={"APPLIANCE_DATABASE_URL": pg_url}).start()
    try:
        after = api_answers(on_postgresql, key, refs, numbers)
    finally:
        on_postgresql.stop()
    assert len([k for k in before if k.startswith("message ")]) > 40
    for what in before:
        assert after[what] == before[what], what
    assert after.keys() == before.keys()
