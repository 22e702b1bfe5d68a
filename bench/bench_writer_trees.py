"""The writer of this tree beside another tree's (``--baseline DIR``: a checkout of the
commit before a change to the writer), in the same run, on both engines.

Each measurement runs in a fresh process over the tree it measures; the two trees take
turns (each first in every other round), ``--rounds`` times, and the medians are
printed with their ratio (this tree's over the baseline's: 1.00 is equal), and the
median of each round's ratio.

- **threads**: ``--producers`` threads each write one small row and wait for its commit
  (``writer.call``), for ``--seconds``: durable writes per second;
- **coroutines**: ``--coroutines`` coroutines in one event loop, each awaiting
  ``writer.run`` of one small row: durable writes per second.

Beside each rate, the measuring process's CPU time per write: on a busy machine the rate
follows whoever else runs, the CPU a write costs much less.

On SQLite (a file in a temporary directory, ``synchronous = FULL``) and on PostgreSQL (a
throwaway server with ``fsync = on``, ``synchronous_commit = on``).

Run: ``.venv/bin/python bench/bench_writer_trees.py --baseline /path/to/old/checkout``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_postgresql import DurablePgServer  # noqa: E402

# Run in the measured tree's process: the store the settings name, one workload.
CHILD = r"""
import asyncio, json, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from appliance.config import Settings
from appliance.store import Store

data, url, mode = sys.argv[2], sys.argv[3], sys.argv[4]
n, seconds = int(sys.argv[5]), float(sys.argv[6])
store = Store.open(Settings(data_dir=Path(data), database_url=url))
INSERT = ("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, 'x', 0)"
          " ON CONFLICT (key) DO NOTHING")

def unit(key):
    return lambda c: c.execute(INSERT, (key,))

done = [0]
def producer(p):
    i = 0
    while time.monotonic() < stop:
        store.writer.call(unit(f"t{p}-{i}"))
        i += 1
    done[0] += i

async def coroutine(p):
    i = 0
    while time.monotonic() < stop:
        await store.writer.run(unit(f"c{p}-{i}"))
        i += 1
    done[0] += i

async def coroutines():
    await asyncio.gather(*(coroutine(p) for p in range(n)))

started, cpu = time.monotonic(), time.process_time()
stop = started + seconds
if mode == "threads":
    threads = [threading.Thread(target=producer, args=(p,)) for p in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
else:
    asyncio.run(coroutines())
elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
store.close()
print(json.dumps([done[0] / elapsed, cpu / done[0] * 1e6]))
"""


def measure(tree: Path, data: Path, url: str, mode: str, n: int,
            seconds: float) -> tuple[float, float]:
    """Durable writes per second, and the process's CPU microseconds per write."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(data), url, mode,
                          str(n), str(seconds)], check=True, capture_output=True, text=True,
                         timeout=300)
    rate, cpu = json.loads(out.stdout.strip().splitlines()[-1])
    return float(rate), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--coroutines", type=int, default=64)
    args = parser.parse_args()
    trees = {"this tree": ROOT, "baseline": args.baseline.resolve()}
    figures: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    server = DurablePgServer.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for engine in ("SQLite", "PostgreSQL"):
                    for mode, n in (("threads", args.producers),
                                    ("coroutines", args.coroutines)):
                        # Each tree first in every other round: neither always
                        # meets the machine as the other left it.
                        order = list(trees.items())
                        for name, tree in order if r % 2 == 0 else order[::-1]:
                            data = Path(tmp) / f"{name[0]}{r}{engine}{mode}"
                            data.mkdir()
                            url = (server.create_database(f"b{r}{mode[0]}{name[0]}")
                                   if engine == "PostgreSQL" else "")
                            figures.setdefault((engine, mode, name), []).append(
                                measure(tree, data, url, mode, n, args.seconds))
    finally:
        server.stop()
    print(f"durable writes/s and CPU µs a write, medians of {args.rounds} rounds;"
          " this tree vs baseline")
    for engine in ("SQLite", "PostgreSQL"):
        for mode, n in (("threads", args.producers), ("coroutines", args.coroutines)):
            ours = [r for r, _ in figures[(engine, mode, "this tree")]]
            theirs = [r for r, _ in figures[(engine, mode, "baseline")]]
            new, old = statistics.median(ours), statistics.median(theirs)
            # Each round's two figures were measured next to each other: their ratio
            # is less at the mercy of a busy machine than the medians'.
            paired = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
            cpu_new = statistics.median(c for _, c in figures[(engine, mode, "this tree")])
            cpu_old = statistics.median(c for _, c in figures[(engine, mode, "baseline")])
            print(f"{engine}, {n} {mode}: {new:,.0f} vs {old:,.0f} writes/s: x{new / old:.2f}"
                  f" (rounds' ratios x{paired:.2f}); CPU {cpu_new:.0f} vs {cpu_old:.0f} µs:"
                  f" x{cpu_new / cpu_old:.2f}")


if __name__ == "__main__":
    main()
