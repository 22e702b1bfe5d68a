"""The sender's write units against the size of the backlog: does a message cost the same
behind 200,000 waiting ones as behind 2,000?

For each backlog size, a database (no statistics, as the appliance runs: it never
``ANALYZE``\\ s) holds that many ``QUEUED`` messages in ``--campaigns`` running campaigns
queued one after the other (and three high-priority singles). The sender's three
units then run over the first
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
from appliance.sending.claims import claim_due, mark_sending  # noqa: E402
from appliance.sending.outcomes import record_outcomes  # noqa: E402
from appliance.store.schema import open_connection  # noqa: E402
from bench.bench_claim import NOW, build  # noqa: E402


def measure(messages: int, campaigns: int, sample: int, batch: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "units.db")
        build(path, messages, campaigns, one_after_another=True)
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
