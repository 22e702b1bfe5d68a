"""What the message's row lock costs a report's settling on PostgreSQL.

``reports.apply.settle`` locks the message's row (``SELECT ... FOR UPDATE``) before it
reads the parts (in the statement that finds the message), so two processes settling
reports of one message take turns. On SQLite
the lock is no statement at all. This measures settling on PostgreSQL (fsync on), each
report about its own submitted message, in write units of ``--batch`` reports as the
reconciler's, with the lock and, as the same-run baseline, without it (the lock
skipped), in turn, ``--rounds`` times; it prints the medians and their ratio.

    .venv/bin/python bench/bench_pg_settle.py [--reports 2000] [--batch 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.reports import apply  # noqa: E402
from appliance.reports.inbox import InboxReport, file_report  # noqa: E402
from appliance.store import pg_schema  # noqa: E402
from appliance.store.dialect import Dialect  # noqa: E402
from appliance.store.pg import PgConnection  # noqa: E402
from bench.bench_postgresql import DurablePgServer  # noqa: E402


def prepare(conn: PgConnection, round_no: int, reports: int) -> list[Any]:
    """``reports`` submitted messages of one part, and a DELIVERED report for each."""
    conn.execute("BEGIN")
    first = round_no * reports
    conn.executemany(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, provider_msg_id, created_at, updated_at, submitted_at)"
        " VALUES (?, 1, 'sim', '+905321000001', 'hi', 'SUBMITTED', 0, 0, ?, 0, 0, 1)",
        [(f"ref-{i}", f"pid-{i}") for i in range(first, first + reports)])
    conn.execute(
        "INSERT INTO message_parts (message_id, part, provider_msg_id, state, state_at,"
        " updated_at) SELECT id, 1, provider_msg_id, 'SUBMITTED', 0, 0 FROM messages"
        " WHERE id > ?", (first,))
    waiting = [file_report(conn, InboxReport("sim", f"ref-{i}", f"pid-{i}", "delivered",
                                             2000, "DELIVERED"), None, 5)
               for i in range(first, first + reports)]
    conn.execute("COMMIT")
    return waiting


def settle_all(conn: PgConnection, waiting: list[Any], batch: int) -> float:
    started = time.perf_counter()
    for at in range(0, len(waiting), batch):
        conn.execute("BEGIN")
        for row in waiting[at:at + batch]:
            apply.settle(conn, row, 10)
        conn.execute("COMMIT")
    return len(waiting) / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    pg = DurablePgServer.start()
    try:
        conn = PgConnection.connect(pg.create_database("settle"))
        pg_schema.migrate(conn)
        conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        rates: dict[str, list[float]] = {"locked": [], "unlocked": []}
        round_no = 0
        for _ in range(args.rounds):
            for kind in ("unlocked", "locked"):
                waiting = prepare(conn, round_no, args.reports)
                round_no += 1
                if kind == "locked":
                    rates[kind].append(settle_all(conn, waiting, args.batch))
                else:
                    with mock.patch.object(Dialect, "for_update", new_callable=mock.PropertyMock,
                                           return_value=""):
                        rates[kind].append(settle_all(conn, waiting, args.batch))
        locked, unlocked = (statistics.median(rates[k]) for k in ("locked", "unlocked"))
        print(f"settle on PostgreSQL, {args.reports} reports a round, units of {args.batch},"
              f" medians of {args.rounds}")
        print(f"with the row lock:    {locked:,.0f} reports/s")
        print(f"without (baseline):   {unlocked:,.0f} reports/s")
        print(f"ratio:                {locked / unlocked:.2f}")
        conn.close()
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
