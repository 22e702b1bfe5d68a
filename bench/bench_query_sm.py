"""SMPP ``query_sm`` benchmark (ROUTE-2), beside a baseline from the same run.

A campaign to a provider of ``kind = "smpp"`` whose SMSC sends no receipt at all (the
SMSC simulator with ``--silent-rate 1``; ``pull = true``, ``pull_after_s = 2``,
``pull_rate_per_s = 500``): ``query_sm`` per message (the issue's goal: at most 2 where
the API takes one message a request) and the time from the last send to 100% coverage,
against the same campaign with every receipt pushed over the session (``pull`` off).

Real ``appliance serve`` and ``appliance simulator --smpp-port`` processes. Run:
``.venv/bin/python bench/bench_query_sm.py [--messages 2000] [--parts 1]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.message_text.segments import segment  # noqa: E402
from tests.harness import Server, create_account, wait_for  # noqa: E402
from tests.smpp.appliance_rig import Smsc, smpp_config  # noqa: E402

PULL_AFTER_S = 2.0


def campaign(tmp: Path, messages: int, body: str, *, receipts: bool) -> dict[str, Any]:
    """One campaign to 100% coverage; its query_sm and timings."""
    tmp.mkdir()
    flags = ("--delay-min-ms", "50", "--delay-max-ms", "500", "--seed", "5")
    smsc = Smsc(tmp, *flags, *(() if receipts else ("--silent-rate", "1")))
    smsc.start()
    data = tmp / "data"
    extra = "" if receipts else (f"pull = true\npull_after_s = {PULL_AFTER_S}\n"
                                 "pull_rate_per_s = 500\n")
    cfg = smpp_config(tmp / "cfg.toml", smsc.smpp_port, rate_per_s=2000,
                      response_timeout_s=5.0, extra=extra)
    server = Server(data, cfg)
    try:
        key = create_account(data, "bench")
        server.start()
        with server.client(key) as api:
            numbers = "\n".join(f"+90532{i:07d}" for i in range(messages)) + "\n"
            job = api.post("/api/contacts/import", json={"list": "bench", "text": numbers})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 120)
            started = time.monotonic()
            c = api.post("/api/campaigns", json={"list": "bench", "body": body,
                                                 "provider": "smsc"},
                         headers={"Idempotency-Key": "bench"})
            poll = c.json()["poll"]
            wait_for(lambda: api.get(poll).json()["unsent"] == 0, 600, interval=0.2)
            sent = time.monotonic()
            wait_for(lambda: api.get(poll).json()["coverage_pct"] == 100.0, 1200,
                     interval=0.2, message="100% coverage")
            covered = time.monotonic()
            stats = smsc.smpp()
        queries = sum(stats["queries"].values())
        return {"queries": queries, "per_message": queries / messages,
                "asked_again": sum(1 for n in stats["queries"].values() if n > 1),
                "receipts": sum(stats["receipts_written"].values()),
                "sent_s": sent - started, "to_coverage_s": covered - sent}
    finally:
        server.stop()
        smsc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--parts", type=int, default=1, choices=(1, 2))
    args = parser.parse_args()
    n = args.messages
    body = "bench" if args.parts == 1 else "Kampanya başladı, tüm ürünlerde indirim! " * 3
    assert segment(body).count == args.parts
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        asked = campaign(Path(tmp) / "asked", n, body, receipts=False)
        pushed = campaign(Path(tmp) / "pushed", n, body, receipts=True)
    load_after = os.getloadavg()
    print(f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f}"
          f" {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}"
          f" {load_after[2]:.2f} ({os.cpu_count()} cores)")
    print(f"\nquery_sm per message, {n:,} messages of {args.parts} part(s), no receipt:")
    print(f"  {asked['per_message']:.3f} ({asked['queries']:,} query_sm, receipts"
          f" {asked['receipts']}); parts asked more than once: {asked['asked_again']:,}")
    print(f"  goal (one message a request): at most 2; the floor: {args.parts} (one a part)")
    print(f"\nfrom the last send to 100% coverage (pull_after_s = {PULL_AFTER_S:g}):")
    print(f"  by query_sm only:           {asked['to_coverage_s']:.1f} s"
          f" (campaign sent in {asked['sent_s']:.1f} s)")
    print(f"  every receipt pushed (baseline): {pushed['to_coverage_s']:.1f} s"
          f" (sent in {pushed['sent_s']:.1f} s)")
    print(f"  ratio: {asked['to_coverage_s'] / max(pushed['to_coverage_s'], 0.001):.2f}")


if __name__ == "__main__":
    main()
