"""SMPP benchmark: messages/s through the whole appliance, the session alone, and the
simulator's own ceiling, in one run.

The SMSC simulator runs as its own process (``appliance simulator --port 0
--smpp-port P``, answering at once, receipts with no delay). Per run:

- **appliance**: ``appliance serve`` in its own process with a provider of
  ``kind = "smpp"`` (window 10, ``rate_per_s`` far above what is reached), one campaign
  of ``--appliance-messages`` single-segment messages to a list imported beforehand.
  The figure is messages over the time from the first submission recorded to the last
  (``submitted_at``: claim, ``submit_sm``, the outcome unit with the id mapping and the
  DLR-6 sweep, group commits); with receipts on also the time until the last message
  is final (every receipt stored raw, filed and applied before its
  ``deliver_sm_resp``, in the same process);

- **session**: :class:`appliance.smpp.session.SmppSession` with ``window`` 10 and no
  rate limit, ``submit()`` of ``--messages`` single-segment messages in batches of 100
  (as the sender will call it), receipts handed to a store callback that answers at
  once (so the figure is the session, not the database);
- **bare**: a client that only submits: bind, then keep 10 pre-encoded ``submit_sm`` in
  flight, reading responses (and answering ``deliver_sm`` with ``ESME_ROK`` when
  receipts are on); nothing else.

All with receipts off (``--silent-rate 1``) and on; medians of ``--runs`` runs,
alternating.

Run: ``.venv/bin/python bench/bench_smpp.py`` (``--runs 1 --appliance-messages 2000``
for a quick look)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.smpp import pdu  # noqa: E402
from appliance.smpp.addresses import destination  # noqa: E402
from appliance.smpp.deliver import Deliver  # noqa: E402
from appliance.smpp.session import SmppSession  # noqa: E402
from appliance.smpp.settings import SmppSettings  # noqa: E402
from appliance.smpp.submission import Segment, segments  # noqa: E402
from tests.harness import Server, create_account, free_port, wait_for  # noqa: E402

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


APPLIANCE_CONFIG = """
[sending]
batch_size = 500

[providers.smsc]
kind = "smpp"
host = "127.0.0.1"
port = {port}
system_id = "appliance"
password = "secret"
source_addr = "BENCH"
window = {window}
rate_per_s = 1000000
"""


def _db(data: Path, sql: str) -> tuple[int, ...]:
    conn = apsw.Connection(str(data / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        row = conn.execute(sql).fetchone()
        return tuple(int(v or 0) for v in row) if row else ()
    finally:
        conn.close()


def appliance_run(port: int, n: int, tag: str, receipts: bool) -> tuple[float, float | None]:
    """(messages/s submitted, messages/s final or None) through a whole appliance."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-smpp-"))
    try:
        data = tmp / "data"
        cfg = tmp / "appliance.toml"
        cfg.write_text(APPLIANCE_CONFIG.format(port=port, window=WINDOW))
        key = create_account(data)
        server = Server(data, cfg, env={"APPLIANCE_LOG_LEVEL": "warning"}).start()
        try:
            with server.client(key) as api:
                numbers = "\n".join(f"+9053{i:08d}" for i in range(n)) + "\n"
                job = api.post("/api/contacts/import", json={"list": tag, "text": numbers})
                wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 300)
                api.post("/api/campaigns", json={"list": tag, "body": f"benchmark {tag}",
                                                 "provider": "smsc"}).raise_for_status()
                wait_for(lambda: _db(data, "SELECT count(*) FROM messages WHERE"
                                           " submitted_at IS NOT NULL")[0] == n, 600,
                         interval=0.2)
                first, last = _db(data, "SELECT min(submitted_at), max(submitted_at)"
                                        " FROM messages")
                submitted = n / max((last - first) / 1000, 1e-3)
                final = None
                if receipts:
                    wait_for(lambda: _db(data, "SELECT count(*) FROM messages WHERE"
                                               " finalised_at IS NOT NULL")[0] == n, 600,
                             interval=0.2)
                    (done,) = _db(data, "SELECT max(finalised_at) FROM messages")
                    final = n / max((done - first) / 1000, 1e-3)
        finally:
            server.stop()
        return submitted, final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    parser.add_argument("--appliance-messages", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    worst = float("inf")
    for receipts in (False, True):
        smsc = SmscProcess(receipts)
        try:
            asyncio.run(wait_listening(smsc.port))
            whole: list[float] = []
            finals: list[float] = []
            ours: list[float] = []
            bare: list[float] = []
            for run in range(args.runs):
                sent, final = appliance_run(smsc.port, args.appliance_messages,
                                            f"a{run}r{int(receipts)}", receipts)
                whole.append(sent)
                if final is not None:
                    finals.append(final)
                ours.append(asyncio.run(session_run(smsc.port, args.messages, f"s{run}r",
                                                    receipts)))
                bare.append(asyncio.run(bare_run(smsc.port, args.messages, f"b{run}r")))
                print(f"receipts {'on' if receipts else 'off'}, run {run + 1}: appliance "
                      f"{whole[-1]:.0f}/s" + (f" ({final:.0f}/s to final)" if final else "")
                      + f", session {ours[-1]:.0f}/s, bare {bare[-1]:.0f}/s", flush=True)
        finally:
            smsc.stop()
        w, a, b = statistics.median(whole), statistics.median(ours), statistics.median(bare)
        worst = min(worst, w)
        print(f"\nsubmit_sm, window {WINDOW}, receipts {'on' if receipts else 'off'},"
              f" median of {args.runs}:")
        print(f"  appliance (sender, store, outcomes, {args.appliance_messages} messages):"
              f" {w:.0f} messages/s submitted")
        if finals:
            print(f"  appliance, to every message final (receipts stored and applied):"
                  f" {statistics.median(finals):.0f} messages/s")
        print(f"  session alone ({args.messages} messages, receipts to a callback):"
              f" {a:.0f} submit_sm/s")
        print(f"  bare client (pre-encoded, only submits): {b:.0f} submit_sm/s")
        print(f"  ratios: appliance / bare {w / b:.2f}, session / bare {a / b:.2f}\n")
    goal = 1000
    print(f"goal >= {goal} submit_sm/s with window {WINDOW} through the appliance: "
          f"{'met' if worst >= goal else 'MISSED'} ({worst:.0f}/s at worst)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
