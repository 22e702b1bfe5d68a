"""Sending benchmark: submissions per second to the local simulator, recorded.

Against the provider simulator (receipts off: ``--silent-rate 1``, so the figure is
the send path alone) it measures, per run:

- **appliance**: a campaign of ``--messages`` contacts through a real
  ``appliance serve`` (``synchronous=FULL``): from the campaign's ``202`` until every
  message is ``SUBMITTED`` in the database (claimed, sent, and its outcome committed),
  as messages/s;
- **baseline**: raw ``httpx.AsyncClient`` posting the same Vonage form to the same
  simulator with the same concurrency (one client, ``max_connections`` = concurrency),
  as messages/s; nothing is stored.

The figure is the ratio appliance / baseline, medians of ``--runs`` runs. Then the
race scenario (every receipt pushed before its submission is answered, 10% duplicate,
10% reordered, 5% throttled) with ``--race-messages`` messages: the time from the
simulator's last acknowledged receipt to 100% coverage as polled through the API.

Run: ``.venv/bin/python bench/bench_send.py``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import Server, create_account, wait_for  # noqa: E402
from tests.sending.support import SimulatorProcess, provider_config  # noqa: E402

FORM = {"api_key": "simulator", "api_secret": "simulator-api-secret", "from": "BENCH",
        "text": "benchmark", "callback": "http://127.0.0.1:9/none", "status-report-req": "1"}


async def baseline(url: str, messages: int, concurrency: int, tag: str) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(messages):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                r = await client.post(url + "/sms/json", data={
                    **FORM, "to": f"90532{i:07d}", "client-ref": f"{tag}-{i}"})
                r.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return messages / (time.perf_counter() - started)


def appliance_run(api: httpx.Client, messages: int, run: int) -> float:
    numbers = "\n".join(f"+9053{run}{i:07d}" for i in range(messages)) + "\n"
    job = api.post("/api/contacts/import", json={"list": f"bench-{run}", "text": numbers})
    job.raise_for_status()
    wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 300)
    started = time.perf_counter()
    c = api.post("/api/campaigns", json={"list": f"bench-{run}", "body": "benchmark"})
    c.raise_for_status()
    poll = c.json()["poll"]
    wait_for(lambda: api.get(poll).json()["counts"].get("SUBMITTED") == messages, 600,
             interval=0.05, message="all submitted")
    return messages / (time.perf_counter() - started)


def race(tmp: Path, messages: int) -> dict[str, Any]:
    sim = SimulatorProcess(tmp, "--early-reports", "--duplicate-rate", "0.1", "--reorder-rate",
                           "0.1", "--throttle-rate", "0.05", "--delay-min-ms", "20",
                           "--delay-max-ms", "300", "--seed", "1").start()
    data = tmp / "race-data"
    data.mkdir()
    cfg = provider_config(tmp / "race.toml", sim.url, rate_per_s=100_000, concurrency=16)
    server = Server(data, config=cfg).start()
    try:
        with server.client(create_account(data, "race")) as api:
            numbers = "\n".join(f"+90533{i:07d}" for i in range(messages)) + "\n"
            job = api.post("/api/contacts/import", json={"list": "race", "text": numbers})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 300)
            started = time.perf_counter()
            poll = api.post("/api/campaigns", json={"list": "race", "body": "r"}).json()["poll"]
            wait_for(lambda: (d := api.get(poll).json())["state"] == "DONE"
                     and d["coverage_pct"] == 100.0, 900, interval=0.02)
            covered_ms = time.time_ns() // 1_000_000
            elapsed = time.perf_counter() - started
            stats = sim.stats()
            return {"messages": messages, "seconds": elapsed,
                    "lag_ms": max(0, covered_ms - stats["last_final_report_ms"]),
                    "duplicates_submitted": stats["duplicates_submitted"]}
    finally:
        server.stop()
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--race-messages", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-send-") as d:
        tmp = Path(d)
        sim = SimulatorProcess(tmp, "--silent-rate", "1").start()
        data = tmp / "data"
        data.mkdir()
        cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=1_000_000,
                              concurrency=args.concurrency)
        server = Server(data, config=cfg).start()
        ours: list[float] = []
        base: list[float] = []
        try:
            with server.client(create_account(data, "bench")) as api:
                for run in range(args.runs):
                    base.append(asyncio.run(baseline(sim.url, args.messages, args.concurrency,
                                                     f"b{run}")))
                    ours.append(appliance_run(api, args.messages, run))
                    print(f"run {run + 1}: appliance {ours[-1]:.0f}/s, "
                          f"raw httpx {base[-1]:.0f}/s", flush=True)
        finally:
            server.stop()
            sim.stop()
        a, b = statistics.median(ours), statistics.median(base)
        print(f"\nsend, receipts off, {args.messages} messages, concurrency "
              f"{args.concurrency}, median of {args.runs}:")
        print(f"  appliance (submitted and recorded): {a:.0f} messages/s")
        print(f"  baseline (raw httpx, nothing stored): {b:.0f} messages/s")
        print(f"  ratio: {a / b:.2f}")
        if args.race_messages:
            r = race(tmp, args.race_messages)
            print(f"\nrace scenario, {r['messages']} messages, every receipt early: "
                  f"{r['seconds']:.1f} s end to end "
                  f"({r['messages'] / r['seconds']:.0f} messages/s with receipts); "
                  f"last receipt -> 100% coverage {r['lag_ms']} ms "
                  f"(polled every 20 ms); submitted twice: {r['duplicates_submitted']}")


if __name__ == "__main__":
    main()
