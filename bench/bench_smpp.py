"""SMPP benchmark: submit_sm/s through our session beside the simulator's own ceiling.

The SMSC simulator runs as its own process (``appliance simulator --port 0
--smpp-port P``, answering at once, receipts with no delay). In this process, per run:

- **session**: :class:`appliance.smpp.session.SmppSession` with ``window`` 10 and no
  rate limit, ``submit()`` of ``--messages`` single-segment messages in batches of 100
  (as the sender will call it), receipts handed to a store callback that answers at
  once (so the figure is the session, not the database);
- **bare**: a client that only submits: bind, then keep 10 pre-encoded ``submit_sm`` in
  flight, reading responses (and answering ``deliver_sm`` with ``ESME_ROK`` when
  receipts are on); nothing else.

Both with receipts off (``--silent-rate 1``) and on. The figure is the ratio session /
bare, medians of ``--runs`` runs, alternating.

Run: ``.venv/bin/python bench/bench_smpp.py``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.smpp import pdu  # noqa: E402
from appliance.smpp.addresses import destination  # noqa: E402
from appliance.smpp.deliver import Deliver  # noqa: E402
from appliance.smpp.session import SmppSession  # noqa: E402
from appliance.smpp.settings import SmppSettings  # noqa: E402
from appliance.smpp.submission import Segment, segments  # noqa: E402
from tests.harness import free_port  # noqa: E402

WINDOW = 10
BATCH = 100


class SmscProcess:
    def __init__(self, receipts: bool) -> None:
        self.port = free_port()
        args = [sys.executable, "-m", "appliance", "simulator", "--port", "0", "--smpp-port",
                str(self.port), "--delay-min-ms", "0", "--delay-max-ms", "0", "--seed", "1"]
        if not receipts:
            args += ["--silent-rate", "1"]
        self.proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def settings(port: int) -> SmppSettings:
    return SmppSettings(name="bench", host="127.0.0.1", port=port, system_id="appliance",
                        password="secret", source_addr="BENCH", window=WINDOW,
                        rate_per_s=1e9, reconnect_min_s=0.1, reconnect_max_s=0.5)


def message_segments(tag: str, n: int, port: int) -> list[Segment]:
    src = settings(port).source()
    out: list[Segment] = []
    for i in range(n):
        out += segments(f"{tag}{i}", destination(f"+90532{i:07d}"), src, "GSM-7",
                        [f"benchmark {tag} {i}"])
    return out


async def session_run(port: int, n: int, tag: str, receipts: bool) -> float:
    got = 0

    async def on_deliver(d: Deliver) -> bool:
        nonlocal got
        got += 1
        return True

    session = SmppSession(settings(port), on_deliver)
    await session.start()
    assert await session.wait_bound(10), session.state()
    segs = message_segments(tag, n, port)
    started = time.perf_counter()
    for at in range(0, n, BATCH):
        outs = await session.submit(segs[at:at + BATCH])
        assert all(o.result.value == "ACCEPTED" for o in outs), outs[0]
    rate = n / (time.perf_counter() - started)
    if receipts:  # let the receipts in flight land before unbinding
        deadline = time.monotonic() + 30
        while got < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    await session.stop()
    return rate


async def bare_run(port: int, n: int, tag: str) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(pdu.bind(pdu.BIND_TRANSCEIVER, 1, system_id="appliance", password="secret"))
    resp = await pdu.read_frame(reader)
    assert pdu.header(resp).status == 0
    frames = [pdu.submit_sm(i + 2, source_addr=s.source.addr, source_ton=s.source.ton,
                            source_npi=s.source.npi, destination_addr=s.destination.addr,
                            dest_ton=s.destination.ton, dest_npi=s.destination.npi,
                            esm_class=0, registered_delivery=1, data_coding=0,
                            short_message=s.short_message)
              for i, s in enumerate(message_segments(tag, n, port))]
    started = time.perf_counter()
    sent = answered = 0
    while sent < min(WINDOW, n):
        writer.write(frames[sent])
        sent += 1
    while answered < n:
        frame = await pdu.read_frame(reader)
        head = pdu.header(frame)
        if head.command_id == pdu.SUBMIT_SM | pdu.RESP:
            answered += 1
            if sent < n:
                writer.write(frames[sent])
                sent += 1
        elif head.command_id == pdu.DELIVER_SM:
            writer.write(pdu.deliver_sm_resp(head.sequence))
    rate = n / (time.perf_counter() - started)
    writer.write(pdu.unbind(n + 2))
    writer.close()
    return rate


async def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    worst = float("inf")
    for receipts in (False, True):
        smsc = SmscProcess(receipts)
        try:
            asyncio.run(wait_listening(smsc.port))
            ours: list[float] = []
            bare: list[float] = []
            for run in range(args.runs):
                ours.append(asyncio.run(session_run(smsc.port, args.messages, f"s{run}r",
                                                    receipts)))
                bare.append(asyncio.run(bare_run(smsc.port, args.messages, f"b{run}r")))
                print(f"receipts {'on' if receipts else 'off'}, run {run + 1}: session "
                      f"{ours[-1]:.0f}/s, bare {bare[-1]:.0f}/s", flush=True)
        finally:
            smsc.stop()
        a, b = statistics.median(ours), statistics.median(bare)
        worst = min(worst, a)
        print(f"\nsubmit_sm, window {WINDOW}, receipts {'on' if receipts else 'off'},"
              f" {args.messages} messages, median of {args.runs}:")
        print(f"  session (window, rate, outcomes, receipts to a callback): {a:.0f} submit_sm/s")
        print(f"  bare client (pre-encoded, only submits): {b:.0f} submit_sm/s")
        print(f"  ratio: {a / b:.2f}\n")
    goal = 1000
    print(f"goal >= {goal} submit_sm/s with window {WINDOW}: "
          f"{'met' if worst >= goal else 'MISSED'} ({worst:.0f}/s at worst)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
