"""The claim's cost of reading each commercial message's İYS recipient type (IYS-2).

The sender's claim (:func:`appliance.sending.claims.claim_due`) reads, in its select of
the reserved rows, the recipient type of each commercial message's consent record in
force (one probe of ``consents``' (account_id, msisdn) key a message, inside the one
statement per chunk of 500). Two databases of the same backlog (``--messages`` QUEUED
campaign messages, ``bench/bench_claim.py``'s), in the same run:

- **commercial**: every message ``commercial``, every number with a consent record
  (BIREYSEL and TACIR alternating);
- **baseline**: the same messages with no type (no recipient type read).

Each run times one claim of ``--batch`` messages inside a transaction that is rolled
back. Medians of ``--runs`` runs. Run: ``.venv/bin/python bench/bench_claim_iys.py``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.sending.claims import claim_due  # noqa: E402
from appliance.store.schema import open_connection  # noqa: E402
from bench.bench_claim import NOW, build, timed  # noqa: E402


def make_commercial(path: str) -> None:
    conn = open_connection(path)
    with conn:
        conn.execute("UPDATE messages SET message_type = 'commercial'")
        conn.execute(
            "INSERT INTO consents (account_id, msisdn, status, recipient_type, source,"
            " consented_at, received_at) SELECT DISTINCT 1, msisdn, 'ONAY', CASE WHEN"
            " id % 2 = 0 THEN 'TACIR' ELSE 'BIREYSEL' END, '', 0, 0 FROM messages"
            " WHERE account_id = 1 GROUP BY msisdn")
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--campaigns", type=int, default=4)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, commercial = str(Path(tmp) / "plain.db"), str(Path(tmp) / "commercial.db")
        build(plain, args.messages, args.campaigns)
        build(commercial, args.messages, args.campaigns)
        make_commercial(commercial)
        typed = timed(commercial, args.runs,
                      lambda c: sum(1 for m in claim_due(c, "sim", NOW, args.batch, 0)
                                    if m.recipient_type is not None))
        base = timed(plain, args.runs, lambda c: len(claim_due(c, "sim", NOW, args.batch, 0)))
    print(f"{args.messages:,} queued over {args.campaigns} campaigns, batch {args.batch}:"
          f" commercial claim (recipient types read) {typed:.2f} ms, baseline (no type)"
          f" {base:.2f} ms, ratio {typed / base:.2f}")


if __name__ == "__main__":
    main()
