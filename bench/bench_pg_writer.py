"""The PostgreSQL writer's bulk lane and once-per-commit hand-back, each beside the
single-lane, once-per-unit behaviour it replaced, in the same run.

PostgreSQL is a throwaway server (``tests/pg_server.py``) started here with ``fsync =
on``; the writer commits with ``synchronous_commit = on``.

- **Hand-back**: ``--coroutines`` coroutines in one event loop each write one small row
  and await it, for ``--seconds``; units per second, and the event loop's wake-ups (calls
  into it from the writer's thread) per commit. Baseline: each coroutine awaits
  ``asyncio.wrap_future(writer.submit(unit))``, one wake-up per unit, as the
  PostgreSQL writer did before it shared SQLite's core.
- **Bulk lane**: a steady stream of small units (an accept, a callback) while an import's
  parts (``--part-rows`` rows each, four in flight, the next queued the moment one is
  committed) keep the writer busy; the small units' median and 99th-percentile latency.
  Baseline: the parts submitted as ordinary units (one lane).

Rounds alternate new and baseline, ``--rounds`` times; medians are printed with their
ratio.

Run: ``.venv/bin/python bench/bench_pg_writer.py [--seconds 2] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.store import Store  # noqa: E402
from appliance.store.connection import Connection  # noqa: E402
from appliance.store.pg import PgConnection  # noqa: E402
from appliance.store.pg_store import open_postgresql  # noqa: E402
from bench.bench_postgresql import DurablePgServer  # noqa: E402

INSERT = ("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, 'x', 0)"
          " ON CONFLICT (key) DO NOTHING")


def insert(key: str) -> Callable[[Connection], None]:
    def unit(conn: Connection) -> None:
        conn.execute(INSERT, (key,))
    return unit


def hand_back(store: Store[PgConnection], coroutines: int, seconds: float,
              once_per_unit: bool) -> tuple[float, float]:
    """Units per second and event-loop wake-ups per commit."""
    writer = store.writer

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        wakes = 0
        real = loop.call_soon_threadsafe

        def counted(callback: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return real(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        write: Callable[[Callable[[PgConnection], None]], Awaitable[None]] = (
            (lambda u: asyncio.wrap_future(writer.submit(u))) if once_per_unit
            else writer.run)
        stop = time.monotonic() + seconds
        done = 0

        async def producer(n: int) -> None:
            nonlocal done
            i = 0
            while time.monotonic() < stop:
                await write(insert(f"h{once_per_unit}-{n}-{i}"))
                i += 1
            done += i

        commits = writer.stats.commits
        started = time.monotonic()
        await asyncio.gather(*(producer(n) for n in range(coroutines)))
        elapsed = time.monotonic() - started
        return done / elapsed, wakes / max(1, writer.stats.commits - commits)

    return asyncio.run(main())


def bulk_lane(store: Store[PgConnection], seconds: float, part_rows: int,
              bulk: bool) -> tuple[float, float]:
    """The small units' median and 99th-percentile latency (ms) beside an import."""
    writer = store.writer
    stop = threading.Event()
    tag = "b" if bulk else "o"

    def part(n: int) -> Callable[[PgConnection], None]:
        def unit(conn: PgConnection) -> None:
            conn.executemany(INSERT, [(f"p{tag}{n}-{i}",) for i in range(part_rows)])
        return unit

    counter = iter(range(10**9))
    in_flight: list[Future[None]] = []
    finished = threading.Event()

    def next_part(done: Future[None] | None = None) -> None:
        """A part queued the moment one is committed (its future's callback runs in the
        writer's thread), four in flight, as the import worker keeps them."""
        if done is not None:
            in_flight.remove(done)
        if stop.is_set():
            if not in_flight:
                finished.set()
            return
        f = writer.submit(part(next(counter)), bulk=bulk)
        in_flight.append(f)
        f.add_done_callback(next_part)

    latencies: list[float] = []
    for _ in range(4):
        next_part()
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t = time.perf_counter()
        writer.call(insert(f"s{tag}{i}"))
        latencies.append((time.perf_counter() - t) * 1000)
        i += 1
        time.sleep(0.005)  # a steady trickle, ~200 a second at most
    stop.set()
    finished.wait(120)
    latencies.sort()
    return statistics.median(latencies), latencies[int(0.99 * (len(latencies) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--coroutines", type=int, default=64)
    parser.add_argument("--part-rows", type=int, default=500)
    args = parser.parse_args()

    server = DurablePgServer.start()
    try:
        store = open_postgresql(server.create_database("bench"), read_connections=1)
        try:
            rows: dict[str, list[tuple[float, float]]] = {}
            for _ in range(args.rounds):
                for name, once in (("per commit", False), ("per unit", True)):
                    rows.setdefault(f"hand-back {name}", []).append(
                        hand_back(store, args.coroutines, args.seconds, once))
                for name, bulk in (("bulk lane", True), ("one lane", False)):
                    rows.setdefault(f"import beside: {name}", []).append(
                        bulk_lane(store, args.seconds, args.part_rows, bulk))
        finally:
            store.close()
    finally:
        server.stop()

    def med(key: str, at: int) -> float:
        return statistics.median(r[at] for r in rows[key])

    new, old = med("hand-back per commit", 0), med("hand-back per unit", 0)
    print(f"hand-back, {args.coroutines} coroutines: {new:,.0f} units/s"
          f" ({med('hand-back per commit', 1):.2f} wake-ups a commit) vs once per unit"
          f" {old:,.0f} units/s ({med('hand-back per unit', 1):.2f}): x{new / old:.2f}")
    for at, label in ((0, "median"), (1, "p99")):
        new, old = med("import beside: bulk lane", at), med("import beside: one lane", at)
        print(f"small unit beside an import, {label}: bulk lane {new:.1f} ms vs one lane"
              f" {old:.1f} ms: x{new / old:.2f}")


if __name__ == "__main__":
    main()
