"""IYS-2: what the consent check (and the duplicate-today key) adds to campaign expansion.

A commercial campaign of ``--n`` numbers against ``--consents-factor`` × N consents in
the account (every campaign number has ONAY, so every message is created): the time to
expand it into messages with ``[compliance] country = "TR"`` (consent looked up per
contact, each message keyed for IYS-4) against the same campaign expanded without
(``country = ""``), in the same run, on the same SQLite file, interleaved; the median
of ``--runs`` each, printed as a ratio (goal <= 1.10).

``--shuffled`` imports the list in a random order (as a brand's export may be), its ids
in that order; without it the list is in number order. Expansion takes the list in the
order of its numbers either way (``appliance/sending/campaign_messages.py``), so the two
should take about as long; by id, a shuffled list put each chunk's numbers all over every
index keyed by the number. The load average is printed before and after.

Run: ``.venv/bin/python bench/bench_consent_expansion.py --n 100000``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from appliance.imports.import_job import ensure_list  # noqa: E402
from appliance.sending.campaign_messages import expand_chunk  # noqa: E402
from appliance.sending.campaigns import (  # noqa: E402
    Campaign,
    NewCampaign,
    create_campaign,
    get_campaign,
)
from appliance.store import Store  # noqa: E402
from appliance.store.connection import Connection  # noqa: E402

BODY = "Indirim! Ret icin RET yazin. ACME Mersis 0123456789"


def populate(store: Store[Connection], n: int, factor: int, shuffled: bool) -> None:
    order = list(range(n))
    if shuffled:
        random.Random(30).shuffle(order)

    def unit(c: Connection) -> None:
        c.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        list_id = ensure_list(c, 1, "people", 0)
        c.executemany("INSERT INTO contacts (list_id, msisdn, created_at) VALUES (?, ?, 0)",
                      [(list_id, f"+90532{i:07d}") for i in order])
        c.executemany(
            "INSERT INTO consents (account_id, msisdn, status, recipient_type, source,"
            " consented_at, received_at) VALUES (1, ?, ?, 'BIREYSEL', 'HS_WEB', 1, 1)",
            [(f"+90532{i:07d}", "ONAY" if i < n else ("RET" if i % 7 == 0 else "ONAY"))
             for i in range(n * factor)])
    store.writer.call(unit, timeout=3600)


def expand(store: Store[Connection], run: int, gated: bool) -> tuple[float, float]:
    """The expansion's wall time, and the writer thread's CPU time in its units (the
    commits left out): the second barely moves with what else the machine runs."""
    def start(c: Connection) -> int:
        made, _ = create_campaign(c, NewCampaign(1, "people", "sim", BODY, f"k{run}",
                                                 message_type="commercial"), 0)
        return made.id

    cid = store.writer.call(start)
    counter = iter(range(10**9))
    cpu = 0.0

    def unit(c: Connection, campaign: Campaign) -> None:
        nonlocal cpu
        at = time.thread_time()
        expand_chunk(c, campaign=campaign, new_ref=lambda: f"R{run}-{next(counter)}",
                     now_ms=1000 + run, consent_gate=gated, sender="ACME" if gated else None)
        cpu += time.thread_time() - at

    began = time.perf_counter()
    while True:
        campaign = store.readers.call(lambda c: get_campaign(c, cid))
        assert campaign is not None
        if campaign.expanded:
            break
        store.writer.call(partial(unit, campaign=campaign))
    took = time.perf_counter() - began
    # The next run's messages go to the same numbers: clear these (not timed).
    store.writer.call(lambda c: c.execute("DELETE FROM messages WHERE campaign_id = ?",
                                          (cid,)), timeout=3600)
    return took, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--consents-factor", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shuffled", action="store_true",
                    help="import the list in a random order, not in number order")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        store: Store[Connection] = Store.open(str(Path(tmp) / "appliance.db"))
        try:
            populate(store, args.n, args.consents_factor, args.shuffled)
            times: dict[bool, list[float]] = {False: [], True: []}
            cpus: dict[bool, list[float]] = {False: [], True: []}
            for run in range(args.runs * 2):
                gated = run % 2 == 1
                took, cpu = expand(store, run, gated)
                times[gated].append(took)
                cpus[gated].append(cpu)
        finally:
            store.close()
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    cpu_without, cpu_with = statistics.median(cpus[False]), statistics.median(cpus[True])
    runs = "; ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(times[False], times[True], strict=True))
    print(f"commercial campaign of {args.n:,} numbers, {args.n * args.consents_factor:,}"
          " consents in the account, the list " + ("shuffled" if args.shuffled
                                                    else "in number order"))
    print(f"  expansion without [compliance]: {without:.2f} s (median of {args.runs})")
    print(f"  expansion with country = TR:    {with_:.2f} s  ratio {with_ / without:.3f}"
          " (goal <= 1.10)")
    print(f"  runs (without / with): {runs}")
    print(f"  writer CPU in the units: {cpu_without:.2f} s without, {cpu_with:.2f} s with,"
          f" ratio {cpu_with / cpu_without:.3f}")
    print(f"  load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
