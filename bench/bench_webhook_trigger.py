"""What the status-webhook triggers (OPS-5) cost the hot path.

Each message's life as the store sees it: accepted (``insert_message``), claimed in
batches of 500 (``claim_due``), its outcome recorded (``record_outcomes``), its receipt
applied (``receive``): the real units, on one connection, one transaction per batch
(``synchronous=NORMAL``, so the figure is the work, not the disk's fsync). Same run,
webhooks off (no trigger: what every appliance without ``[webhooks]`` runs, and the
schema before OPS-5) against webhooks on (the triggers write an outbox row for each
of the three state changes, to the ``[webhooks]`` receiver), and against the account's
own receiver (TEAM-2: ``[webhooks]`` off, the account given one; the triggers look the
receiver up for each change, then write the same row).

Run: ``.venv/bin/python bench/bench_webhook_trigger.py [--messages 5000] [--runs 3]``
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

from appliance.providers.base import Outcome, SubmitResult  # noqa: E402
from appliance.reports.apply import receive  # noqa: E402
from appliance.reports.inbox import InboxReport, RawCallback  # noqa: E402
from appliance.sending.accept import NewMessage, insert_message  # noqa: E402
from appliance.sending.claims import claim_due, mark_sending  # noqa: E402
from appliance.sending.outcomes import record_outcomes  # noqa: E402
from appliance.store.schema import migrate, open_connection  # noqa: E402
from appliance.webhooks.outbox import set_receiver  # noqa: E402
from appliance.webhooks.receivers import set_account_receiver  # noqa: E402

BATCH = 500
NOW = 1_700_000_000_000
RAW = RawCallback("sim", "POST", "application/json", "", b"{}")


def one_run(messages: int, variant: str) -> float:
    """Seconds for ``messages`` messages through accept, claim, outcome and receipt."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        migrate(path)
        conn = open_connection(path, synchronous="NORMAL")
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'b', 0)")
        if variant == "on":
            set_receiver(conn, "http://127.0.0.1:9/", NOW)
        if variant == "account":
            set_receiver(conn, None, NOW)
            set_account_receiver(conn, 1, "http://127.0.0.1:9/a", "s", NOW)
        started = time.perf_counter()
        for start in range(0, messages, BATCH):
            refs = [f"R{i:08d}" for i in range(start, min(messages, start + BATCH))]
            with conn:
                for i, ref in enumerate(refs, start):
                    insert_message(conn, NewMessage(1, "sim", f"+90532{i:07d}", "hi"), ref, NOW)
            with conn:
                # The sender's two steps: reserve a batch, then make each SENDING.
                claimed = mark_sending(conn, claim_due(conn, "sim", NOW + 1, BATCH), NOW + 1)
            with conn:
                record_outcomes(conn, "sim",
                                [(m, Outcome(SubmitResult.ACCEPTED, f"P{m.id}")) for m in claimed],
                                NOW + 2, max_attempts=8, dedupes_on_ref=False,
                                map_provider_ids=False)
            with conn:
                receive(conn, RAW, [InboxReport("sim", ref, "", "delivered", NOW + 3,
                                                "DELIVERED") for ref in refs], None, NOW + 3)
        elapsed = time.perf_counter() - started
        if variant != "off":
            row = conn.execute("SELECT count(*) FROM webhook_outbox").fetchone()
            assert row is not None and row[0] == 3 * messages, row
        conn.close()
        return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"off": [], "on": [], "account": []}
    for _ in range(args.runs):  # interleaved, so a noisy neighbour hits both alike
        for variant, times in runs.items():
            times.append(one_run(args.messages, variant))
    results = {variant: statistics.median(times) for variant, times in runs.items()}
    base = results["off"]
    print(f"{args.messages} messages, accept + claim + outcome + receipt, median of {args.runs}:")
    for variant, label in (("off", "webhooks off (baseline)"), ("on", "webhooks on"),
                           ("account", "account's own receiver")):
        seconds = results[variant]
        print(f"  {label:24} {seconds * 1000:8.0f} ms  {seconds / args.messages * 1e6:6.1f}"
              f" µs/message  x{seconds / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
