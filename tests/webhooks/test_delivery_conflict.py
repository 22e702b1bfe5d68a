"""An event's ``2xx`` whose unit meets another process's lock is written again, not
POSTed again.

On PostgreSQL two processes' writers can meet on a row (a deadlock between their
batches, a lock held past ``lock_timeout``): the unit fails with ``StoreConflict`` and
sending it again succeeds. For a webhook event that the receiver has already taken,
leaving that outcome unrecorded means a second POST of the same event. Here a
connection of the test's own holds the receiver row the delivery records into for two
seconds, longer than ``busy_timeout_ms`` several times over: the event is marked
delivered once the row is free, and the receiver got it once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.harness import Server, create_account, db_rows, wait_for
from tests.sending.support import SimulatorProcess, provider_config, send
from tests.webhooks.support import Receiver, webhook_config

HOLD_S = 2.0  # past the one-second hold an unrecorded outcome gets before its next POST


def test_a_delivered_event_whose_unit_meets_a_lock_is_recorded_not_posted_again(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setenv("APPLIANCE_DATABASE_URL", pg_url)
    sim = SimulatorProcess(tmp_path, "--delay-min-ms", "5", "--delay-max-ms", "20",
                           "--delivered-rate", "1").start()
    receiver = Receiver().start()
    cfg = provider_config(tmp_path / "c.toml", sim.url)
    cfg.write_text("busy_timeout_ms = 300\n" + cfg.read_text())
    webhook_config(cfg, receiver)
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data)
        with psycopg.connect(pg_url) as holder, server.client(key) as api:
            holder.execute("SELECT * FROM webhook_receiver WHERE id = 1 FOR UPDATE")
            ref = send(api, "+905321230001")
            wait_for(lambda: len(receiver.taken()) >= 1, 30, message="the first event POSTed")
            # The delivery's unit now waits 300 ms for the row and fails, again and again:
            # for as long as the row is held, nothing is POSTed a second time.
            until = time.monotonic() + HOLD_S
            while time.monotonic() < until:
                assert len(receiver.all()) == 1, "the event was POSTed again"
                time.sleep(0.05)
            holder.rollback()

            def delivered() -> bool:
                rows = db_rows(data, "SELECT count(*), count(delivered_at) FROM webhook_outbox"
                               " WHERE ref = ?", (ref,))
                return bool(rows[0][0] >= 2 and rows[0][0] == rows[0][1])

            wait_for(delivered, 30, message="every event of the message delivered")
    finally:
        server.stop()
        receiver.stop()
        sim.stop()
    ids = [r.event["event_id"] for r in receiver.all()]
    assert len(ids) == len(set(ids)), f"an event POSTed twice: {ids}"
