"""``appliance backup`` under a sustained write load, and ``appliance restore``."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.store.schema import SCHEMA_VERSION
from tests.harness import Server, create_account, run_cli, wait_for
from tests.ops.load import ImportLoad, ReportFlood, read_db
from tests.reports.support import http_provider_config


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scalar(conn: apsw.Connection, sql: str, args: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


def open_ro(path: Path) -> apsw.Connection:
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)


@pytest.mark.slow
def test_backup_under_imports_and_a_report_flood_holds_every_committed_row(
        tmp_path: Path, data_dir: Path) -> None:
    config = http_provider_config(tmp_path / "appliance.toml")
    srv = Server(data_dir, config=config,
                 env={"APPLIANCE_IMPORT_CHUNK_LINES": "500"}).start()
    key = create_account(data_dir)
    flood = ReportFlood(srv).start()
    imports = ImportLoad(srv, key).start()
    dest = tmp_path / "backups" / "live.db"
    dest.parent.mkdir()
    try:
        wait_for(lambda: flood.count() > 300 and len(imports.jobs) >= 2, 30,
                 message="load to build up")
        # Everything acknowledged or committed before this moment must be in the copy.
        started = time.monotonic()
        acked_before = flood.acked_before(started)
        contacts_before = read_db(data_dir, "SELECT count(*) FROM contacts")[0][0]
        jobs_before = read_db(data_dir, "SELECT id, processed FROM import_jobs")
        during_before = flood.count()
        out = run_cli("backup", str(dest), "--data-dir", str(data_dir))
        finished = time.monotonic()
        during = flood.count() - during_before
    finally:
        imports.stop()
        flood.stop()
        srv.stop()
    assert out.stdout.strip().splitlines()[-1] == str(dest.absolute())
    assert during > 0, "the report flood stalled while the backup ran"
    assert contacts_before > 0 and acked_before
    assert not list(dest.parent.glob(".*tmp*")), "a temporary file was left behind"

    copy = open_ro(dest)
    try:
        assert [r[0] for r in copy.execute("PRAGMA integrity_check")] == ["ok"]
        refs = {str(r[0]) for r in copy.execute("SELECT ref FROM report_inbox")}
        assert acked_before <= refs, f"{len(acked_before - refs)} acknowledged reports missing"
        assert scalar(copy, "SELECT count(*) FROM contacts") >= contacts_before
        progress = dict(copy.execute("SELECT id, processed FROM import_jobs"))
        for job_id, processed in jobs_before:
            assert progress[job_id] >= processed
        # A job's position and its rows are one transaction: the copy is consistent.
        for job_id, inserted in copy.execute("SELECT id, inserted FROM import_jobs"):
            rows = scalar(copy, "SELECT count(*) FROM contacts WHERE job_id = ?", (job_id,))
            assert rows == inserted
        assert scalar(copy, "PRAGMA journal_mode") == "delete"
        counts = {t: scalar(copy, f'SELECT count(*) FROM "{t}"')
                  for t in ("contacts", "report_inbox", "import_jobs")}
    finally:
        copy.close()
    manifest = json.loads((tmp_path / "backups" / "live.db.manifest.json").read_text())
    assert manifest["sha256"] == sha256(dest)
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["bytes"] == dest.stat().st_size
    assert all(manifest["row_counts"][t] == n for t, n in counts.items())
    assert finished - started < 30


def _seeded_server(tmp_path: Path, data_dir: Path) -> tuple[Server, str]:
    srv = Server(data_dir).start()
    key = create_account(data_dir)
    with srv.client(key) as api:
        resp = api.post("/api/contacts/import", json={"list": "keep",
                                                      "text": "+905321111111\n+905322222222"})
        job = int(resp.json()["jobId"])
        wait_for(lambda: api.get(f"/api/jobs/{job}").json()["state"] == "DONE", 30,
                 message="import")
    return srv, key


@pytest.mark.slow
def test_restore_round_trip_brings_back_exactly_the_backup(tmp_path: Path,
                                                           data_dir: Path) -> None:
    srv, key = _seeded_server(tmp_path, data_dir)
    backup = tmp_path / "b.db"
    try:
        run_cli("backup", str(backup), "--data-dir", str(data_dir))
        with srv.client(key) as api:  # a write after the backup: the restore undoes it
            resp = api.post("/api/contacts/import", json={"list": "later",
                                                          "text": "+905323333333"})
            job = int(resp.json()["jobId"])
            wait_for(lambda: api.get(f"/api/jobs/{job}").json()["state"] == "DONE", 30,
                     message="second import")
        refused = run_cli("restore", str(backup), "--data-dir", str(data_dir), check=False)
        assert refused.returncode == 1
        assert "stop the server" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        srv.stop()
    assert read_db(data_dir, "SELECT count(*) FROM contacts")[0][0] == 3

    out = run_cli("restore", str(backup), "--data-dir", str(data_dir))
    assert "restored" in out.stdout
    aside = list(data_dir.glob("appliance.db.pre-restore-*"))
    assert len(aside) == 1, "the previous database is kept aside"
    assert scalar(open_ro(aside[0]), "SELECT count(*) FROM contacts") == 3
    assert not (data_dir / "restore.pending").exists()

    srv.restart()
    try:
        with srv.client(key) as api:  # the same key still works: accounts came back
            assert api.get("/api/lists/keep").json()["contacts"] == 2
            assert api.get("/api/lists/later").status_code == 404
        wait_for(lambda: not list(data_dir.glob("appliance.db.pre-restore-*")), 15,
                 message="the kept-aside database to go after a good start")
    finally:
        srv.stop()

    # Disaster recovery: restore into an empty directory on another box.
    other = tmp_path / "other"
    run_cli("restore", str(backup), "--data-dir", str(other))
    rows = read_db(other, "SELECT msisdn FROM contacts ORDER BY msisdn")
    assert rows == [("+905321111111",), ("+905322222222",)]


def _corrupt(src: Path, dest: Path) -> None:
    data = bytearray(src.read_bytes())
    page = 4096
    for offset in range(page, len(data), page):  # every page but the header page
        data[offset + 8:offset + 200] = os.urandom(192)
    dest.write_bytes(bytes(data))


@pytest.mark.slow
def test_restore_refuses_bad_files_and_leaves_the_data_untouched(tmp_path: Path,
                                                                 data_dir: Path) -> None:
    srv, _ = _seeded_server(tmp_path, data_dir)
    good = tmp_path / "good.db"
    try:
        run_cli("backup", str(good), "--data-dir", str(data_dir))
    finally:
        srv.stop()
    live_before = sha256(data_dir / "appliance.db")
    listing_before = sorted(p.name for p in data_dir.iterdir())

    corrupt = tmp_path / "corrupt.db"
    _corrupt(good, corrupt)
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("this is not a database\n" * 100)
    newer = tmp_path / "newer.db"
    newer.write_bytes(good.read_bytes())
    conn = apsw.Connection(str(newer))
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    tampered = tmp_path / "tampered.db"
    tampered.write_bytes(good.read_bytes())
    manifest = json.loads((tmp_path / "good.db.manifest.json").read_text())
    manifest["sha256"] = "0" * 64
    (tmp_path / "tampered.db.manifest.json").write_text(json.dumps(manifest))
    foreign = tmp_path / "foreign.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE notes (x); PRAGMA user_version = 1")
    conn.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")

    cases = {
        corrupt: ("integrity_check", "damaged", "malformed"),
        not_sqlite: ("not an SQLite database",),
        newer: ("schema version 99", "newer"),
        tampered: ("does not match its manifest",),
        foreign: ("not an appliance database",),
        empty: ("not an SQLite database",),
        tmp_path / "missing.db": ("no such backup file",),
    }
    for path, phrases in cases.items():
        out = run_cli("restore", str(path), "--data-dir", str(data_dir), check=False)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1, (path, out.stderr)
        assert len(lines) == 1 and lines[0].startswith("Error: restore refused:"), out.stderr
        assert any(p in lines[0] for p in phrases), (path, lines[0])
        assert sha256(data_dir / "appliance.db") == live_before
        assert sorted(p.name for p in data_dir.iterdir()) == listing_before, path

    srv.restart()
    try:
        assert srv.client().get("/readyz").status_code == 200
    finally:
        srv.stop()
    assert read_db(data_dir, "SELECT count(*) FROM contacts")[0][0] == 2


def test_backup_refuses_clearly(tmp_path: Path, data_dir: Path) -> None:
    out = run_cli("backup", str(tmp_path / "x.db"), "--data-dir", str(tmp_path / "nothing"),
                  check=False)
    assert out.returncode == 1 and "no database at" in out.stderr
    assert "Traceback" not in out.stderr
    create_account(data_dir)
    out = run_cli("backup", str(tmp_path / "no" / "such" / "dir.db"), "--data-dir",
                  str(data_dir), check=False)
    assert out.returncode == 1 and "does not exist" in out.stderr
    out = run_cli("backup", str(data_dir / "appliance.db"), "--data-dir", str(data_dir),
                  check=False)
    assert out.returncode == 1 and "live database itself" in out.stderr


def test_an_interrupted_restore_blocks_the_start_until_restore_runs_again(
        tmp_path: Path, data_dir: Path) -> None:
    create_account(data_dir)
    backup = tmp_path / "b.db"
    run_cli("backup", str(backup), "--data-dir", str(data_dir))
    (data_dir / "restore.pending").write_text("{}")  # as if the power went mid-restore
    out = run_cli("serve", "--data-dir", str(data_dir), "--port", "0", check=False, timeout=30)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert "interrupted restore" in lines[0] and "appliance restore" in lines[0]
    run_cli("restore", str(backup), "--data-dir", str(data_dir))
    assert not (data_dir / "restore.pending").exists()
    assert read_db(data_dir, "SELECT name FROM accounts") == [("acme",)]
