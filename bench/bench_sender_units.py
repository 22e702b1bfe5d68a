"""The sender's write units against the size of the backlog: does a message cost the same
behind 200,000 waiting ones as behind 2,000?

For each backlog size, a database (no statistics, as the appliance runs: it never
``ANALYZE``\\ s) holds that many ``QUEUED`` messages in ``--campaigns`` running
campaigns queued one after the other. The sender's three units then run over the first
``--sample`` messages as the sender runs them, each in its own committed transaction
(``synchronous=FULL``): ``claim_due`` of ``--batch``, ``mark_sending`` of what it
claimed, ``record_outcomes`` (accepted, with the provider's id). The figure is the CPU a
message of those units, and the wall time of each; the baseline is the same at the
smallest backlog, in the same run. A ratio near 1.00 means the cost does not grow with
the backlog.

Run: ``.venv/bin/python bench/bench_sender_units.py [--sizes 2000,50000,200000]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.base import Outcome, SubmitResult  # noqa: E402
from appliance.sending.messages import claim_due, mark_sending, record_outcomes  # noqa: E402
from appliance.store.schema import migrate, open_connection  # noqa: E402

NOW = 1_800_000_000_000


def build(path: str, messages: int, campaigns: int) -> None:
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
        conn.executemany(
            "INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body,"
            " state, next_attempt_at, created_at, updated_at, priority) VALUES"
            " (?, 1, ?, 'sim', ?, 'b', 'QUEUED', ?, 0, 0, 1)",
            ((f"R{i:025d}", 1 + i // per, f"+9053{i:08d}", NOW - messages + i)
             for i in range(messages)))
    conn.close()


def measure(messages: int, campaigns: int, sample: int, batch: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "units.db")
        build(path, messages, campaigns)
        conn = open_connection(path)
        walls = {"claim": 0.0, "mark": 0.0, "record": 0.0}
        done = turn = 0
        cpu = time.process_time()
        try:
            while done < sample:
                t = time.perf_counter()
                with conn:
                    got = claim_due(conn, "sim", NOW, batch, turn)
                walls["claim"] += time.perf_counter() - t
                t = time.perf_counter()
                with conn:
                    marked = mark_sending(conn, got, NOW)
                walls["mark"] += time.perf_counter() - t
                t = time.perf_counter()
                with conn:
                    record_outcomes(conn, "sim", [(m, Outcome(SubmitResult.ACCEPTED,
                                                              f"id-{m.id}")) for m in marked],
                                    NOW, max_attempts=5, dedupes_on_ref=False,
                                    map_provider_ids=False)
                walls["record"] += time.perf_counter() - t
                assert marked, "the backlog ran out"
                done += len(marked)
                turn += 1
            cpu = time.process_time() - cpu
        finally:
            conn.close()
    out = {k: v / done * 1e6 for k, v in walls.items()}
    out["cpu"] = cpu / done * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,50000,200000",
                    help="backlog sizes, the first is the baseline")
    ap.add_argument("--campaigns", type=int, default=2)
    ap.add_argument("--sample", type=int, default=1500, help="messages through the units")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base: dict[str, float] | None = None
    print(f"sender units, {args.campaigns} campaigns queued one after the other, batches of"
          f" {args.batch}, {args.sample} messages, µs a message:")
    for size in sizes:
        got = measure(size, args.campaigns, min(args.sample, size // 2), args.batch)
        base = base or got
        print(f"  backlog {size:>8,}: CPU {got['cpu']:6.0f} (claim {got['claim']:5.0f},"
              f" mark {got['mark']:5.0f}, record {got['record']:5.0f} wall)"
              f"  ratio to backlog {sizes[0]:,}: {got['cpu'] / base['cpu']:.2f}", flush=True)


if __name__ == "__main__":
    main()
