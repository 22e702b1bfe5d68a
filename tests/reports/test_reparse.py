"""Quarantined callbacks are read again later (DLR-2), e.g. after a parser fix."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import apsw

from appliance.config import ProviderSettings
from appliance.provider_kinds import build_adapter
from appliance.reports.apply import receive
from appliance.reports.inbox import RawCallback
from appliance.reports.reparse import reparse
from appliance.store import Store
from tests.edge.support import edge_config
from tests.harness import Server, db_rows, wait_for
from tests.reports.support import (
    PROVIDER,
    SECRET,
    add_account,
    add_message,
    message,
    one,
    post_report,
)

NOW = 1_767_225_600_000


def test_a_quarantined_callback_that_now_parses_is_filed_and_applied(store: Store) -> None:
    adapter = build_adapter(ProviderSettings(name=PROVIDER, kind="http",
                                             base_url="http://127.0.0.1:9", secret=SECRET))
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "R1"))
    good = json.dumps({"ref": "R1", "status": "delivered",
                       "reported_at": "2026-01-01T00:00:01Z"}).encode()
    # Stored by an older parser that could not read it, and one nobody can read.
    quarantined = [RawCallback(PROVIDER, "POST", "application/json", "", good),
                   RawCallback(PROVIDER, "POST", "application/json", "", b"still not json"),
                   RawCallback("gone", "POST", "application/json", "", good)]
    store.writer.call(lambda c: [receive(c, raw, [], "old parser failed", NOW)
                                 for raw in quarantined])

    result, last = store.writer.call(
        lambda c: reparse(c, {PROVIDER: adapter}, NOW + 5, after_id=0, limit=10))
    assert (result.parsed, result.still_unreadable, result.reports, last) == (1, 1, 1, 3)
    assert store.readers.call(lambda c: message(c, "R1"))["state"] == "DELIVERED"
    left = store.readers.call(lambda c: one(
        c, "SELECT count(*) FROM raw_reports WHERE parsed = 0"))
    assert left == (2,)  # the unreadable one and the one whose provider is gone
    reason = store.readers.call(lambda c: one(
        c, "SELECT error FROM raw_reports WHERE body = ?", b"still not json"))
    assert "old parser failed" not in reason[0]  # the latest reason is kept

    again, _ = store.writer.call(
        lambda c: reparse(c, {PROVIDER: adapter}, NOW + 6, after_id=0, limit=10))
    assert again.reports == 0  # nothing filed twice


def test_a_callback_that_cannot_be_filed_is_skipped_and_the_rest_are_read(
        tmp_path: Path) -> None:
    """A real server: a signed callback with a lone surrogate is kept quarantined; the
    re-reading at the next start skips and counts it, and reads the one after it."""
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, config=edge_config(tmp_path / "appliance.toml"))
    server.start()
    try:
        with server.client() as anon:
            lone = (b'{"ref": "x\\ud800", "status": "delivered",'
                    b' "reported_at": "2026-01-01T00:00:00Z"}')
            assert post_report(anon, lone).status_code == 200
        server.stop()
        # A callback an older parser could not read, quarantined after the first one.
        good = json.dumps({"ref": "LATER00000000001", "status": "delivered",
                           "reported_at": "2026-01-01T00:00:01Z"}).encode()
        db = apsw.Connection(str(data / "appliance.db"))
        try:
            db.execute("INSERT INTO raw_reports (provider, method, content_type, query, body,"
                       " received_at, parsed, error) VALUES (?, 'POST', 'application/json',"
                       " '', ?, ?, 0, 'old parser failed')",
                       (PROVIDER, good, int(time.time() * 1000)))
            # Received now: a row from 1970 would be pruned by retention once read, before
            # the test could see it read.
        finally:
            db.close()
        server.start()  # the re-reading runs at every start

        def read_again() -> list[Any] | None:
            rows = db_rows(data, "SELECT parsed, error FROM raw_reports ORDER BY id")
            return rows if [r[0] for r in rows] == [0, 1] else None

        rows = wait_for(read_again, 30, interval=0.1, message="the second callback read")
        assert "not valid Unicode" in str(rows[0][1])
        assert db_rows(data, "SELECT ref FROM report_inbox") == [("LATER00000000001",)]
        wait_for(lambda: "skipped on a second look" in server.log(), 10,
                 message="the skipped callback logged")
    finally:
        server.stop()
