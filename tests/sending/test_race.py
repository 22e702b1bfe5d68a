"""THE RACE (note 000, DLR-6): every receipt arrives before its submission is recorded.

A 2,000-message campaign (``RACE_MESSAGES``) against the simulator configured to push every receipt
before answering the submission (so while the sender's batch is uncommitted), with
10% duplicate receipts, 10% reordered (final first, an older intermediate later) and
5% throttled submissions. Afterwards: every message the simulator reported on has its
final state, nothing was submitted twice, no final state was overwritten (ours equals
the simulator's for every ref), and the inbox holds nothing waiting.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.harness import Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, provider_config

# Each message races on its own: 2,000 of them give the race (receipts before the
# record for at least 90%), duplicates, reorders and throttling in earnest; 4,000 and
# 10,000 proved nothing more and took two and five times longer.
MESSAGES = int(os.environ.get("RACE_MESSAGES", "2000"))
STATES = {"delivered": "DELIVERED", "failed": "FAILED", "expired": "EXPIRED"}


def db_rows(data_dir: Path, sql: str) -> list[Any]:
    conn = apsw.Connection(str(data_dir / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


@pytest.mark.slow
def test_reports_before_the_record_are_never_lost(tmp_path: Path) -> None:
    sim = SimulatorProcess(
        tmp_path, "--early-reports", "--duplicate-rate", "0.1", "--reorder-rate", "0.1",
        "--throttle-rate", "0.05", "--delay-min-ms", "20", "--delay-max-ms", "300",
        "--seed", "42").start()
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, rate_per_s=100_000,
                          concurrency=int(os.environ.get("RACE_CONCURRENCY", "8")))
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            numbers = "\n".join(f"+90532{i:07d}" for i in range(MESSAGES)) + "\n"
            job = api.post("/api/contacts/import", json={"list": "race", "text": numbers})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 60)
            started = time.monotonic()
            c = api.post("/api/campaigns", json={"list": "race", "body": "race"},
                         headers={"Idempotency-Key": "race"})
            assert c.status_code == 202 and c.json()["total"] == MESSAGES
            poll = c.json()["poll"]

            def covered() -> dict[str, Any] | None:
                d: dict[str, Any] = api.get(poll).json()
                return d if d["state"] == "DONE" and d["coverage_pct"] == 100.0 else None

            done = wait_for(covered, 900, interval=0.1, message="100% coverage")
            covered_at_ms = time.time_ns() // 1_000_000
            elapsed = time.monotonic() - started

            stats = wait_for(lambda: (s := sim.stats())["pending_reports"] == 0 and s, 60)
            lag_ms = max(0, covered_at_ms - stats["last_final_report_ms"])
            print(f"\nrace: {MESSAGES} messages in {elapsed:.1f} s "
                  f"({MESSAGES / elapsed:.0f}/s end to end); last receipt -> 100% coverage "
                  f"observed after {lag_ms} ms (poll interval 100 ms); "
                  f"{stats['throttled']} throttled, "
                  f"{stats['reports_acknowledged']} receipts acknowledged")

            assert done["created"] == MESSAGES
            assert stats["duplicates_submitted"] == 0
            assert stats["reports_given_up"] == 0
            sim_refs = stats["refs"]
            ours = {ref: state for ref, state in db_rows(
                data, "SELECT ref, state FROM messages WHERE campaign_id IS NOT NULL")}
            assert len(ours) == MESSAGES
            assert all(sim_refs[r]["accepted"] == 1 for r in ours), "submitted twice"
            assert stats["throttled"] > 0
            assert any(m["received"] > 1 for m in sim_refs.values())  # throttled, then sent
            wrong = {r: (s, sim_refs[r]["final"]) for r, s in ours.items()
                     if STATES[sim_refs[r]["final"]] != s}
            assert not wrong, f"{len(wrong)} final states differ, e.g. {list(wrong.items())[:3]}"
            waiting = db_rows(data, "SELECT COUNT(*) FROM report_inbox WHERE applied_at IS NULL")
            assert waiting[0][0] == 0
            repeats = db_rows(data, "SELECT SUM(repeats) FROM report_inbox")[0][0]
            assert repeats > 0  # duplicates arrived and were absorbed as the same fact
            stale = db_rows(data, "SELECT COUNT(*) FROM report_inbox WHERE outcome = 'STALE'")
            assert stale[0][0] > 0  # reordered intermediates were kept, not applied
            early = db_rows(data, "SELECT COUNT(*) FROM report_inbox r JOIN messages m"
                            " ON m.id = r.message_id WHERE r.received_at < m.submitted_at")
            assert early[0][0] >= MESSAGES * 0.9  # the race really happened
    finally:
        server.stop()
        sim.stop()
