"""Why one writer thread with group commit: small durable writes per second.

Many concurrent producers (like callback handlers) each write one small row and
wait for it to be durable (synchronous=FULL). Compared in the same run:
- our Writer: one thread, one connection, group commit;
- the baseline: each producer with its own apsw connection doing its own
  BEGIN IMMEDIATE ... COMMIT (SQLite's lock and busy timeout serialise them).

Run: ``.venv/bin/python bench/bench_writer.py [--producers 32] [--seconds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.store import Store  # noqa: E402
from appliance.store.schema import migrate, open_connection  # noqa: E402

INSERT = ("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, 'x', 0)"
          " ON CONFLICT (key) DO NOTHING")


def run(producers: int, seconds: float, write: Callable[[str], None]) -> tuple[float, float]:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def producer(n: int) -> None:
        mine: list[float] = []
        i = 0
        while time.monotonic() < stop:
            t = time.perf_counter()
            write(f"{n}-{i}")
            mine.append(time.perf_counter() - t)
            i += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(producers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    return len(latencies) / elapsed, latencies[int(0.99 * (len(latencies) - 1))] * 1000


def ours(path: str, producers: int, seconds: float) -> tuple[float, float]:
    store = Store.open(path)
    try:
        def write(key: str) -> None:
            store.writer.call(lambda c: c.execute(INSERT, (key,)))
        return run(producers, seconds, write)
    finally:
        store.close()


def baseline(path: str, producers: int, seconds: float) -> tuple[float, float]:
    migrate(path)
    local = threading.local()

    def write(key: str) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = open_connection(path, busy_timeout_ms=60_000)
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except apsw.BusyError:
                continue
        conn.execute(INSERT, (key,))
        conn.execute("COMMIT")

    return run(producers, seconds, write)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"ours": [], "base": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            rows["ours"].append(ours(f"{tmp}/o{i}.db", args.producers, args.seconds))
            rows["base"].append(baseline(f"{tmp}/b{i}.db", args.producers, args.seconds))
    o_rate = statistics.median(r for r, _ in rows["ours"])
    o_p99 = statistics.median(p for _, p in rows["ours"])
    b_rate = statistics.median(r for r, _ in rows["base"])
    b_p99 = statistics.median(p for _, p in rows["base"])
    print(f"{args.producers} producers, synchronous=FULL, median of {args.repeat} runs")
    print(f"group-commit writer: {o_rate:,.0f} durable writes/s, p99 {o_p99:.1f} ms")
    print(f"connection per producer: {b_rate:,.0f} durable writes/s, p99 {b_p99:.1f} ms")
    print(f"ratio: {o_rate / b_rate:.1f}x")


if __name__ == "__main__":
    main()
