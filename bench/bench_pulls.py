"""Pull benchmarks (ROUTE-2), each beside a baseline from the same run.

- Status requests per message for a campaign whose provider never pushes a receipt
  (the simulator with ``--no-push``, ``pull_after_s = 2``): with the simulator's batches
  (``batch_max = 100``) against the same campaign asked one message a request
  (``batch_max = 1``); and the time from ``pull_after_s`` to 100% coverage, against the
  same campaign with every receipt pushed.
- The server's CPU a message from the campaign's start to 100% coverage (user +
  system, from ``/proc``, the server and its children): with every answer pulled
  against every receipt pushed. The sending is the same in both, so the difference is
  a pulled answer's cost against a pushed receipt's (goal: no more).
- Pulls a second over a 10 s window against ``pull_rate_per_s`` (one message a request,
  more due than the rate lets through): the measured rate beside the configured one.
- ``--kind twilio``: the same campaign to a provider whose API asks one message a
  request (``kind = "twilio"``, "Fetch a Message resource", against a fake Twilio
  served in this process, :mod:`bench.twilio_fake`): status requests per message (the
  issue's goal: at most 2) and the time from the last send to 100% coverage, against
  the same campaign with every status callback pushed (``pull = false``).

Real ``appliance serve`` and ``appliance simulator`` processes. Run:
``.venv/bin/python bench/bench_pulls.py [--messages 10000] [--kind twilio]``
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

from bench.twilio_fake import ACCOUNT_SID, AUTH_TOKEN, RunningTwilio, TwilioFake  # noqa: E402
from tests.harness import Server, create_account, wait_for  # noqa: E402
from tests.sending.support import SimulatorProcess, provider_config  # noqa: E402

PULL_AFTER_S = 2.0
TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its living descendants so far."""
    total, pids = 0, [pid]
    while pids:
        p = pids.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            pids += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
    return total / TICKS


def campaign(tmp: Path, messages: int, *, push: bool, batch_max: int,
             pull_rate_per_s: float = 50.0) -> dict[str, Any]:
    """One campaign to 100% coverage; its status requests and timings."""
    tmp.mkdir()
    flags = ("--delay-min-ms", "50", "--delay-max-ms", "500", "--seed", "5")
    sim = SimulatorProcess(tmp, *flags, *(() if push else ("--no-push",))).start()
    data = tmp / "data"
    data.mkdir()
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=2000, extra=(
        f"pull_after_s = {PULL_AFTER_S}\npull_rate_per_s = {pull_rate_per_s}\n"
        f"batch_max = {batch_max}\n"))
    server = Server(data, config=cfg).start()
    assert server.proc is not None
    pid = server.proc.pid
    try:
        key = create_account(data, "bench")
        with server.client(key) as api:
            numbers = "\n".join(f"+90532{i:07d}" for i in range(messages)) + "\n"
            job = api.post("/api/contacts/import", json={"list": "bench", "text": numbers})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 120)
            started = time.monotonic()
            cpu = tree_cpu_s(pid)
            c = api.post("/api/campaigns", json={"list": "bench", "body": "bench"},
                         headers={"Idempotency-Key": "bench"})
            poll = c.json()["poll"]
            wait_for(lambda: api.get(poll).json()["unsent"] == 0, 600, interval=0.2)
            sent = time.monotonic()
            wait_for(lambda: api.get(poll).json()["coverage_pct"] == 100.0, 1200,
                     interval=0.2, message="100% coverage")
            covered = time.monotonic()
            cpu = tree_cpu_s(pid) - cpu
            stats = sim.stats()
        asked_again = sum(1 for r in stats["refs"].values() if r["pulls"] > 1)
        return {"requests": stats["pull_requests"], "per_message":
                stats["pull_requests"] / messages, "asked": stats["pull_refs_asked"],
                "asked_again": asked_again, "sent_s": sent - started,
                "to_coverage_s": covered - sent, "total_s": covered - started,
                "cpu_us": cpu / messages * 1e6}
    finally:
        server.stop()
        sim.stop()


def twilio_campaign(tmp: Path, messages: int, *, push: bool) -> dict[str, Any]:
    """One campaign to a fake Twilio to 100% coverage: asked one message a request
    (nothing pushed), or every status callback pushed and nothing asked."""
    tmp.mkdir()
    fake = TwilioFake(push=push)
    with RunningTwilio(fake) as twilio:
        data = tmp / "data"
        data.mkdir()
        cfg = tmp / "cfg.toml"
        asks = (f"pull_after_s = {PULL_AFTER_S}\npull_rate_per_s = 1000\n" if not push
                else "pull = false\n")
        cfg.write_text(f"""[providers.tw]
kind = "twilio"
base_url = "{twilio.base_url}"
account_sid = "{ACCOUNT_SID}"
auth_token = "{AUTH_TOKEN}"
sender = "+15005550006"
rate_per_s = 2000
concurrency = 8
{asks}""")
        server = Server(data, config=cfg).start()
        try:
            key = create_account(data, "bench")
            with server.client(key) as api:
                numbers = "\n".join(f"+90532{i:07d}" for i in range(messages)) + "\n"
                job = api.post("/api/contacts/import", json={"list": "bench", "text": numbers})
                wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 120)
                started = time.monotonic()
                c = api.post("/api/campaigns", json={"list": "bench", "body": "bench"},
                             headers={"Idempotency-Key": "bench"})
                poll = c.json()["poll"]
                wait_for(lambda: api.get(poll).json()["unsent"] == 0, 600, interval=0.2)
                sent = time.monotonic()
                wait_for(lambda: api.get(poll).json()["coverage_pct"] == 100.0, 1200,
                         interval=0.2, message="100% coverage")
                covered = time.monotonic()
        finally:
            server.stop()
    fetches = fake.requests["fetch"]
    return {"requests": fetches, "per_message": fetches / messages,
            "asked_again": sum(1 for n in fake.fetches.values() if n > 1),
            "pushed": sum(fake.pushed.values()), "sent_s": sent - started,
            "to_coverage_s": covered - sent}


def twilio_main(n: int) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        asked = twilio_campaign(Path(tmp) / "asked", n, push=False)
        pushed = twilio_campaign(Path(tmp) / "pushed", n, push=True)
    load_after = os.getloadavg()
    print(f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f}"
          f" {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}"
          f" {load_after[2]:.2f} ({os.cpu_count()} cores)")
    print(f"\ntwilio: status requests per message, {n:,} messages, no push:")
    print(f"  {asked['per_message']:.4f} ({asked['requests']:,} requests);"
          f" messages asked more than once: {asked['asked_again']:,}")
    print("  goal (one message a request): at most 2; the floor: 1")
    print(f"\nfrom the last send to 100% coverage (pull_after_s = {PULL_AFTER_S:g}):")
    print(f"  by pulls only:                   {asked['to_coverage_s']:.1f} s"
          f" (campaign sent in {asked['sent_s']:.1f} s)")
    print(f"  every callback pushed (baseline): {pushed['to_coverage_s']:.1f} s"
          f" (sent in {pushed['sent_s']:.1f} s, {pushed['pushed']:,} callbacks,"
          f" {pushed['requests']} status requests)")
    print(f"  ratio: {asked['to_coverage_s'] / max(pushed['to_coverage_s'], 0.001):.2f}")


def rate_window(tmp: Path, rate: float, window_s: float = 10.0) -> float:
    """Status requests a second over ``window_s`` with more due than ``rate`` allows."""
    tmp.mkdir()
    sim = SimulatorProcess(tmp, "--no-push", "--silent-rate", "1").start()
    data = tmp / "data"
    data.mkdir()
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=2000, extra=(
        f"pull_after_s = 1\npull_rate_per_s = {rate}\nbatch_max = 1\n"))
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "bench")
        with server.client(key) as api:
            for i in range(int(rate * window_s * 3)):
                api.post("/api/messages", json={"to": f"+90532{i:07d}", "body": "x"})
            wait_for(lambda: sim.stats()["pull_requests"] > 0, 60)
            first = sim.stats()["pull_requests"]
            at = time.monotonic()
            time.sleep(window_s)  # the measurement window itself
            last = sim.stats()["pull_requests"]
            return float(last - first) / (time.monotonic() - at)
    finally:
        server.stop()
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=5.0, help="pull_rate_per_s to check")
    parser.add_argument("--kind", choices=("simulator", "twilio"), default="simulator",
                        help="the provider's kind: the simulator's batches, or Twilio's"
                             " one message a request")
    args = parser.parse_args()
    n = args.messages
    if args.kind == "twilio":
        twilio_main(n)
        return
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        batched = campaign(base / "batched", n, push=False, batch_max=100)
        single = campaign(base / "single", n, push=False, batch_max=1,
                          pull_rate_per_s=1000.0)
        pushed = campaign(base / "pushed", n, push=True, batch_max=100)
        measured = rate_window(base / "rate", args.rate)
    load_after = os.getloadavg()
    print(f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f}"
          f" {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}"
          f" {load_after[2]:.2f} ({os.cpu_count()} cores)")
    print(f"\nstatus requests per message, {n:,} messages, no push:")
    print(f"  batched (batch_max 100):  {batched['per_message']:.4f}"
          f" ({batched['requests']} requests)")
    print(f"    {batched['asked'] / max(batched['requests'], 1):.1f} messages a request;"
          f" {batched['asked_again']:,} messages asked more than once")
    print(f"  one a request (baseline): {single['per_message']:.4f}"
          f" ({single['requests']} requests)")
    print(f"  ratio: {batched['per_message'] / single['per_message']:.3f}")
    print(f"\nfrom the last send to 100% coverage (pull_after_s = {PULL_AFTER_S:g}):")
    print(f"  by pulls only:             {batched['to_coverage_s']:.1f} s"
          f" (campaign sent in {batched['sent_s']:.1f} s)")
    print(f"  every receipt pushed (baseline): {pushed['to_coverage_s']:.1f} s"
          f" (sent in {pushed['sent_s']:.1f} s)")
    print(f"  ratio: {batched['to_coverage_s'] / max(pushed['to_coverage_s'], 0.001):.2f}")
    print(f"  from the last message's pull_after_s to 100% coverage:"
          f" {batched['to_coverage_s'] - PULL_AFTER_S:.2f} s")
    print("\nthe server's CPU a message, campaign start to 100% coverage (sending included):")
    print(f"  answers pulled (batch_max 100): {batched['cpu_us']:.0f} us")
    print(f"  receipts pushed (baseline):     {pushed['cpu_us']:.0f} us")
    print(f"  ratio: {batched['cpu_us'] / pushed['cpu_us']:.2f}")
    print("\nstatus requests a second over 10 s, one message a request:")
    print(f"  measured: {measured:.2f}/s  pull_rate_per_s: {args.rate:g}/s"
          f"  ratio: {measured / args.rate:.3f}")


if __name__ == "__main__":
    main()
