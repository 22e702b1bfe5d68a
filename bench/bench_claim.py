"""The sender's claim (OPS-1) over a large backlog: is it still a range scan per lane?

A database with ``--messages`` QUEUED campaign messages (200,000 by default) spread over
``--campaigns`` running campaigns of one provider, and a few high-priority singles. Each
run times one claim of ``--batch`` messages (one second of a 200/s provider) inside a
transaction that is rolled back, so every run sees the same backlog:

- **claim**: ``claim_due`` as the sender runs it: high priority first, the campaigns
  found by a skip over ``messages_lanes``, each lane's share a range scan, the
  reservations written;
- **baseline**: the claim as it was before lanes, in the same run: one
  ``ORDER BY next_attempt_at LIMIT`` over ``messages_due`` for the provider and the
  ``SENDING`` update (first come, first served; no priority, no fairness).

Medians of ``--runs`` runs. Run: ``.venv/bin/python bench/bench_claim.py``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.sending.claims import claim_due  # noqa: E402
from appliance.store.schema import migrate, open_connection  # noqa: E402

NOW = 1_800_000_000_000


def build(path: str, messages: int, campaigns: int, one_after_another: bool = False) -> None:
    """``messages`` QUEUED over ``campaigns`` running ones (interleaved, or each queued
    after the whole of the one before) and three high-priority singles."""
    migrate(path)
    conn = open_connection(path)
    with conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'bench', 0)")
        for c in range(1, campaigns + 1):
            conn.execute("INSERT INTO lists (id, account_id, name, created_at)"
                         " VALUES (?, 1, ?, 0)", (c, f"l{c}"))
            conn.execute("INSERT INTO campaigns (id, account_id, list_id, provider, body,"
                         " idempotency_key, state, total, queued_through, last_contact_id,"
                         " created_at, updated_at, personalised) VALUES"
                         " (?, 1, ?, 'sim', 'b', ?, 'RUNNING', 0, 0, 0, 0, 0, 1)",
                         (c, c, f"k{c}"))
        per = -(-messages // campaigns)
        rows = ((f"R{i:025d}", 1 + (i // per if one_after_another else i % campaigns),
                 f"+9053{i:08d}", NOW - messages + i) for i in range(messages))
        conn.executemany(
            "INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body, state,"
            " next_attempt_at, created_at, updated_at, priority) VALUES"
            " (?, 1, ?, 'sim', ?, 'b', 'QUEUED', ?, 0, 0, 1)", rows)
        conn.executemany(
            "INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
            " next_attempt_at, created_at, updated_at, priority) VALUES"
            " (?, 1, 'sim', '+905550000000', 'b', 'QUEUED', ?, 0, 0, 0)",
            ((f"S{i:025d}", NOW) for i in range(3)))
    conn.close()  # no ANALYZE: the appliance never runs it, so its plans have no statistics


def old_claim(conn: object, limit: int) -> int:
    c = conn  # the pre-lanes claim: oldest first over messages_due, all SENDING
    ids = [int(r[0]) for r in c.execute(  # type: ignore[attr-defined]
        "SELECT id FROM messages WHERE state = 'QUEUED' AND next_attempt_at <= ?"
        " AND provider = 'sim' ORDER BY next_attempt_at LIMIT ?", (NOW, limit))]
    marks = ",".join("?" * len(ids))
    c.execute(f"UPDATE messages SET state = 'SENDING', attempts = attempts + 1"  # type: ignore[attr-defined]
              f" WHERE id IN ({marks})", tuple(ids))
    return len(ids)


def timed(path: str, runs: int, fn: object) -> float:
    conn = open_connection(path)
    times = []
    try:
        for _ in range(runs):
            conn.execute("BEGIN IMMEDIATE")
            started = time.perf_counter()
            got = fn(conn)  # type: ignore[operator]
            times.append(time.perf_counter() - started)
            conn.execute("ROLLBACK")
            assert got
    finally:
        conn.close()
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--campaigns", type=int, default=4)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "claim.db")
        build(path, args.messages, args.campaigns)
        new = timed(path, args.runs, lambda c: len(claim_due(c, "sim", NOW, args.batch, 0)))
        old = timed(path, args.runs, lambda c: old_claim(c, args.batch))
    print(f"{args.messages:,} queued over {args.campaigns} campaigns, batch {args.batch}:"
          f" claim {new:.2f} ms, baseline (pre-lanes claim) {old:.2f} ms,"
          f" ratio {new / old:.2f}")


if __name__ == "__main__":
    main()
