"""Summaries that don't scan: ``/api/stats``, ``/dashboard`` and ``/metrics`` over 1,000,000
messages, beside baselines measured in the same run.

The database holds ``--messages`` messages of two accounts, created over the last 72 h
in campaign bursts (``--campaigns`` of them, each created within two minutes, so a
window's edge minute may hold thousands), ~90 % delivered, a report history of as many
rows (applied), as many raw callbacks, and a few thousand messages whose state changed
since they were counted (what the ``rollups`` loop has not folded in yet).

Figures (medians of ``--runs``):
- each page over HTTP from a real ``appliance serve``, signed in (the dashboard) or with
  an API key;
- the same summary in-process (``ops.observability.summary.summary``, one read unit);
- baselines: a bare ``count(*)`` of the coverage window over the covering index, and the
  same figures by scanning the messages (what the summary did before the kept counts:
  one pass over the window grouped by hour, state counts over every message, reports
  by outcome over the whole inbox).

Run: ``.venv/bin/python bench/bench_summary.py [--messages 1000000]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.config import Settings  # noqa: E402
from appliance.ops.observability.summary import summary  # noqa: E402
from appliance.store import rollups  # noqa: E402
from appliance.store.schema import open_connection  # noqa: E402
from tests.harness import FileClock, Server, create_account  # noqa: E402
from tests.web.console_support import create_user, sign_in  # noqa: E402

HOUR = 3_600_000
NOW = 1_767_225_600_000 + 17_345  # not on a minute: every window has partial edge minutes
STATES = ["DELIVERED"] * 90 + ["FAILED"] * 4 + ["UNKNOWN"] * 2 + ["EXPIRED"] + \
    ["SUBMITTED"] * 2 + ["CANCELLED"]


def seed(db: Path, messages: int, campaigns: int, rng: random.Random) -> None:
    conn = open_connection(str(db))
    conn.execute("PRAGMA synchronous=OFF")  # seeding only; the server runs FULL
    accounts = [int(r[0]) for r in conn.execute("SELECT id FROM accounts ORDER BY id")]
    starts = sorted(NOW - rng.randrange(72 * HOUR) for _ in range(campaigns))
    per = messages // campaigns

    def rows() -> Any:
        i = 0
        for c, start in enumerate(starts):
            account = accounts[c % len(accounts)]
            for j in range(per):
                created = start + j * 120_000 // per  # the burst: two minutes
                state = STATES[rng.randrange(len(STATES))]
                submitted = None if state == "CANCELLED" else created + 2_000
                yield (f"M{i:09d}", account, f"+90532{i:07d}", state, created, submitted, state)
                i += 1

    with conn:
        conn.executemany(
            "INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
            " next_attempt_at, created_at, updated_at, submitted_at, counted_state)"
            " VALUES (?, ?, 'gw', ?, 'hello', ?, 0, ?, 0, ?, ?)", rows())
    with conn:
        conn.executemany(
            "INSERT INTO report_inbox (provider, ref, status, reported_at, state, received_at,"
            " next_try_at, message_id, applied_at, outcome) VALUES ('gw', ?, 'delivered', 1,"
            " 'DELIVERED', ?, 0, ?, ?, 'APPLIED')",
            ((f"M{i:09d}", NOW - HOUR, i + 1, NOW - HOUR) for i in range(messages)))
        conn.executemany(
            "INSERT INTO report_inbox (provider, ref, status, reported_at, state, received_at,"
            " next_try_at) VALUES ('gw', ?, 'delivered', 1, 'DELIVERED', ?, ?)",
            ((f"W{i:06d}", NOW - i * 1000, NOW) for i in range(500)))
        conn.executemany(
            "INSERT INTO raw_reports (provider, method, content_type, query, body,"
            " received_at, parsed) VALUES ('gw', 'POST', 'application/json', '', ?, ?, 1)",
            ((b'{"ref":"x","status":"delivered"}', NOW - HOUR) for _ in range(messages)))
    with conn:
        rollups.fill(conn)
    with conn:  # changed since they were counted: not folded in yet
        conn.execute("UPDATE messages SET state = 'DELIVERED' WHERE id IN"
                     " (SELECT id FROM messages WHERE state = 'SUBMITTED' LIMIT 3000)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()


def scanned(conn: apsw.Connection, settings: Settings, account_id: int | None) -> None:
    """The summary's figures by scanning (what the summary cost before the kept counts)."""
    a = settings.alerts
    start = NOW - int(a.coverage_window_hours * HOUR)
    end = NOW - int(a.coverage_settle_hours * HOUR)
    where = "" if account_id is None else f" AND +account_id = {account_id}"
    conn.execute(
        f"SELECT created_at / {HOUR}, count(*), sum(CASE WHEN state IN ('DELIVERED', 'FAILED',"
        " 'EXPIRED', 'REJECTED') THEN 1 ELSE 0 END), sum(CASE WHEN state = 'DELIVERED' THEN 1"
        f" ELSE 0 END) FROM messages WHERE created_at >= ? AND created_at < ?"
        f" AND state <> 'CANCELLED'{where} GROUP BY 1", (start, end)).fetchall()
    conn.execute(
        f"SELECT created_at / {HOUR}, count(*) FROM messages WHERE created_at >= ?"
        f" AND state <> 'CANCELLED'{where} GROUP BY 1", (end,)).fetchall()
    conn.execute("SELECT count(*), min(received_at) FROM report_inbox"
                 " WHERE applied_at IS NULL").fetchall()
    if account_id is None:  # what /metrics added
        conn.execute("SELECT state, count(*) FROM messages GROUP BY state").fetchall()
        conn.execute("SELECT coalesce(outcome, 'WAITING'), count(*) FROM report_inbox"
                     " GROUP BY 1").fetchall()
        conn.execute("SELECT parsed, count(*) FROM raw_reports GROUP BY 1").fetchall()


def timed(fn: Callable[[], object], runs: int) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--campaigns", type=int, default=40)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data_dir = tmp / "data"
        data_dir.mkdir()
        key = create_account(data_dir, "acme")
        create_user(data_dir, account="acme")
        create_account(data_dir, "other")
        db = data_dir / "appliance.db"
        t = time.perf_counter()
        seed(db, args.messages, args.campaigns, rng)
        print(f"seeded {args.messages:,} messages in {time.perf_counter() - t:.0f} s",
              flush=True)
        settings = Settings()
        conn = open_connection(str(db), readonly=True)
        assert rollups.drift(conn) == [], "kept counts differ from a recount"
        a = settings.alerts
        window = (NOW - int(a.coverage_window_hours * HOUR),
                  NOW - int(a.coverage_settle_hours * HOUR))
        results = {
            "summary in-process (one account)": timed(
                lambda: summary(conn, settings, NOW, 1), args.runs),
            "summary in-process (every account)": timed(
                lambda: summary(conn, settings, NOW), args.runs),
            "baseline: bare count(*) of the window": timed(lambda: conn.execute(
                "SELECT count(*) FROM messages WHERE created_at >= ? AND created_at < ?",
                window).fetchone(), args.runs),
            "baseline: the figures by scanning (one account)": timed(
                lambda: scanned(conn, settings, 1), max(3, args.runs // 3)),
            "baseline: the figures by scanning (every account, /metrics' counts)": timed(
                lambda: scanned(conn, settings, None), max(3, args.runs // 3)),
        }
        conn.close()
        clock = FileClock(tmp / "clock", NOW)
        server = Server(data_dir, env=clock.env).start()
        try:
            with server.client(key) as api:
                assert api.get("/api/stats").status_code == 200
                results["GET /api/stats"] = timed(lambda: api.get("/api/stats"), args.runs)
                assert api.get("/metrics").status_code == 200
                results["GET /metrics"] = timed(lambda: api.get("/metrics"), args.runs)
                results["GET /healthz (HTTP floor)"] = timed(lambda: api.get("/healthz"),
                                                             args.runs)
            with sign_in(server) as console:
                assert console.get("/dashboard").status_code == 200
                results["GET /dashboard"] = timed(lambda: console.get("/dashboard"), args.runs)
        finally:
            server.stop()
    print(f"{args.messages:,} messages, {args.campaigns} bursts; medians of {args.runs}")
    for name, ms in results.items():
        print(f"{name:70s} {ms:8.1f} ms")
    print(f"ratio /api/stats to the bare count(*): "
          f"{results['GET /api/stats'] / results['baseline: bare count(*) of the window']:.2f}")


if __name__ == "__main__":
    main()
