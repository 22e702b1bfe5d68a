"""The one-file executable (APP-2), end to end: build it once, then import (a large list
through the parser process too), send through the provider simulator, receive its
reports, back up while serving, restore into a second directory and find the same rows.

Set ``APPLIANCE_BINARY`` to test an existing build; otherwise the suite builds one in
the background while the tests before these run (``tests/binary_build.py``), reusing
``dist/appliance`` when it is newer than every source file.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from appliance.imports.parse_process import PROCESS_MIN_LINES
from appliance.smpp.session import SmppSession
from tests import binary_build
from tests.harness import free_port, wait_for
from tests.imports.corpus import make_corpus
from tests.pg_server import pg_server, pg_url
from tests.smpp.support import Store, message, settings_for
from tests.smpp.support import wait_until as wait_until_async

__all__ = ["pg_server", "pg_url"]  # the PostgreSQL fixtures, used below
FINAL = ("DELIVERED", "FAILED", "EXPIRED", "REJECTED", "UNKNOWN")


@pytest.fixture(scope="module")
def binary() -> Path:
    return binary_build.binary()


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


class Proc:
    def __init__(self, args: list[str], log: Path) -> None:
        with open(log, "ab") as fh:
            self.proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT,
                                         env={**os.environ, "APPLIANCE_LOG_FORMAT": "json"})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(30)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


@pytest.mark.slow
def test_the_binary_imports_sends_backs_up_and_restores(
        binary: Path, tmp_path: Path, procs: list[Proc]) -> None:
    exe = str(binary)
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("appliance, version ")

    data, restored = tmp_path / "data", tmp_path / "restored"
    sim_port, port, intake_port = free_port(), free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "appliance.toml"
    # The receipts come to the report intake's port: its process is started too.
    config.write_text(f'[reports]\nintake_port = {intake_port}\n'
                      f'[providers.sim]\nkind = "simulator"\n'
                      f'base_url = "http://127.0.0.1:{sim_port}"\nrate_per_s = 500\n')
    procs.append(Proc([exe, "simulator", "--port", str(sim_port), "--seed", "7",
                       "--delay-min-ms", "10", "--delay-max-ms", "300",
                       "--duplicate-rate", "0.1", "--reorder-rate", "0.1"],
                      tmp_path / "sim.log"))
    key = subprocess.run([exe, "account", "create", "acme", "--data-dir", str(data)],
                         capture_output=True, text=True, check=True).stdout.splitlines()[-1]
    started = time.monotonic()
    server = Proc([exe, "serve", "--data-dir", str(data), "--port", str(port),
                   "--config", str(config)], tmp_path / "server.log")
    procs.append(server)

    def up() -> bool:
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 30, message="the binary to answer /healthz")
    cold_start = time.monotonic() - started
    total = 300
    text = "\n".join(f"+90533{n:07d}" for n in range(total)) + "\n0532 000 00 0\n"
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=30) as api:
        job = api.post("/api/contacts/import", json={"list": "bin", "text": text}).json()
        wait_for(lambda: api.get(f"/api/jobs/{job['jobId']}").json()["state"] == "DONE", 60,
                 message="the import")
        assert api.get("/api/lists/bin").json()["contacts"] == total
        # A large import is parsed in a second process: the frozen binary starts it too.
        big = make_corpus(PROCESS_MIN_LINES + 5_000, seed=11)
        job = api.post("/api/contacts/import", json={"list": "big", "text": big.text()}).json()
        done = wait_for(lambda: (lambda j: j if j["state"] == "DONE" else None)(
            api.get(f"/api/jobs/{job['jobId']}").json()), 120, message="the large import")
        assert (done["inserted"], done["duplicates_in_paste"], done["rejected"]) == (
            big.inserted, big.duplicates_in_paste, len(big.rejected_lines))
        assert "import parser process started" in (tmp_path / "server.log").read_text()
        campaign = api.post("/api/campaigns", json={"list": "bin", "body": "hello"})
        assert campaign.status_code == 202, campaign.text
        db = data / "appliance.db"
        final = ",".join(f"'{s}'" for s in FINAL)
        wait_for(lambda: rows(db, f"SELECT count(*) FROM messages WHERE state IN ({final})")
                 [0][0] == total, 90, interval=0.2, message="every message to get its report")
        assert api.get("/readyz").status_code == 200
        assert "appliance_messages" in api.get("/metrics").text
        assert "appliance_report_intake_up 1.0" in api.get("/metrics").text
        assert rows(db, "SELECT count(*) FROM raw_reports")[0][0] >= total

        backup = tmp_path / "backup.db"
        out = subprocess.run([exe, "backup", str(backup), "--data-dir", str(data)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    assert server.stop() == 0

    out = subprocess.run([exe, "restore", str(backup), "--data-dir", str(restored)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for sql in ("SELECT msisdn FROM contacts ORDER BY msisdn",
                "SELECT ref, state, msisdn FROM messages ORDER BY ref",
                "SELECT ref, status, reported_at, outcome FROM report_inbox ORDER BY id",
                "SELECT id, state, processed, inserted, rejected FROM import_jobs"):
        assert rows(data / "appliance.db", sql) == rows(restored / "appliance.db", sql), sql
    assert len(rows(restored / "appliance.db", "SELECT ref FROM messages")) == total
    assert cold_start < 20


def test_the_binary_runs_the_smsc_simulator_with_its_native_codec(
        binary: Path, tmp_path: Path, procs: list[Proc]) -> None:
    """smpp34 is a compiled extension: the frozen binary must carry it and load it."""
    smpp_port = free_port()
    procs.append(Proc([str(binary), "simulator", "--port", "0", "--smpp-port", str(smpp_port),
                       "--delay-min-ms", "0", "--delay-max-ms", "0"], tmp_path / "smsc.log"))
    store = Store()

    async def body() -> None:
        session = SmppSession(settings_for(smpp_port, reconnect_max_s=0.2), store.on_deliver)
        await session.start()
        try:
            assert await session.wait_bound(20), session.state()
            outs = await session.submit(message("bin", "İkili dosyadan merhaba " * 4))
            assert len(outs) == 2 and all(o.id_key for o in outs)
            await wait_until_async(lambda: sorted(store.receipt_keys()) == sorted(
                o.id_key or "" for o in outs), 10, what="receipts from the frozen SMSC")
        finally:
            await session.stop()

    asyncio.run(body())


def test_the_binary_carries_its_postgresql_driver(binary: Path, tmp_path: Path,
                                                  pg_url: str) -> None:
    """``migrate --to`` from the frozen binary, forced onto psycopg's bundled libpq
    (``PSYCOPG_IMPL=binary`` fails if the wheel's C module and libpq were left out)."""
    exe, data = str(binary), tmp_path / "data"
    subprocess.run([exe, "account", "create", "acme", "--data-dir", str(data)],
                   capture_output=True, text=True, check=True)
    out = subprocess.run([exe, "migrate", "--data-dir", str(data), "--to", pg_url],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PSYCOPG_IMPL": "binary"})
    assert out.returncode == 0, out.stderr
    assert "every table's count verified" in out.stdout
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT name FROM accounts").fetchall() == [("acme",)]
