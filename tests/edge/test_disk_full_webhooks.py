"""EDGE-4 and OPS-5: status webhooks when the disk is full (a real 30 MB tmpfs).

The receiver takes every event (``2xx``), but the appliance cannot write that it did:
each event stays its message's head. It must not be POSTed again and again as fast as
the receiver answers; it waits on the backoff ladder (at most 5 POSTs of one event a
minute, the issue's bound), and once space is freed every event is recorded delivered.
The same for an account's own receiver (TEAM-2): the hold is per event, whoever receives it.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.edge.support import edge_config
from tests.edge.test_disk_full import fill, small_disk  # noqa: F401 - the fixture
from tests.harness import Server, create_account, db_rows, run_cli, wait_for
from tests.webhooks.support import Receiver, webhook_config

EVENTS = 4
WATCH_S = 8.0


@pytest.mark.parametrize("receiver_of", ["webhooks", "account"])
@pytest.mark.slow
def test_a_full_disk_does_not_turn_webhook_delivery_into_a_storm(
        small_disk: Path, tmp_path: Path, receiver_of: str) -> None:  # noqa: F811 - the fixture
    # The first answers take a while: the disk is full before any outcome is written.
    receiver = Receiver(delay_s=2.0).start()
    cfg = edge_config(tmp_path / "edge.toml")
    if receiver_of == "webhooks":
        webhook_config(cfg, receiver)
    srv = Server(small_disk, config=cfg)
    srv.start()
    ballast = small_disk / "ballast"
    try:
        key = create_account(small_disk)
        if receiver_of == "account":
            run_cli("account", "webhook", "acme", "--url", receiver.url, "--secret", "s",
                    "--data-dir", str(small_disk))
        with srv.client(key) as api:
            refs = []
            for i in range(EVENTS):
                sent = api.post("/api/messages", json={"to": f"+9053212300{i:02d}",
                                                       "body": "x"})
                assert sent.status_code == 202, sent.text
                refs.append(sent.json()["ref"])
            fill(ballast, 0)
            receiver.delay_s = 0.0

            def first_events_posted() -> set[str]:
                posted = {r.event["ref"] for r in receiver.all()
                          if r.event["state"] == "QUEUED"}
                return posted if posted >= set(refs) else set()

            wait_for(first_events_posted, 20, message="every first event POSTed")
            start = time.monotonic()
            wait_for(lambda: time.monotonic() - start > WATCH_S, WATCH_S + 5, interval=0.2,
                     message="the watch to end")
            undelivered = db_rows(small_disk, "SELECT count(*) FROM webhook_outbox"
                                              " WHERE delivered_at IS NULL AND state = 'QUEUED'")
            assert undelivered[0][0] == EVENTS, "the disk was never full: nothing proved"
            per_event = Counter(r.event["event_id"] for r in receiver.all())
            assert len(per_event) >= EVENTS
            assert max(per_event.values()) <= 5, per_event

            # Space again: every event is recorded delivered, none lost.
            ballast.unlink()

            def recorded() -> bool:
                rows = db_rows(small_disk, "SELECT ref FROM webhook_outbox"
                                           " WHERE state = 'QUEUED' AND delivered_at IS NOT NULL")
                return {r[0] for r in rows} == set(refs)

            wait_for(recorded, 40, interval=0.25, message="the events recorded delivered")
        assert srv.proc is not None and srv.proc.poll() is None, "the server kept running"
    finally:
        srv.stop()
        receiver.stop()
        ballast.unlink(missing_ok=True)
