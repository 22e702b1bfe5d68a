"""The writer's side of a large import: the order contacts reach the index.

The same distinct numbers of a 1,000,000-line corpus are inserted into the appliance's
own ``contacts`` table (its ``UNIQUE (list_id, msisdn)`` index, ``synchronous=FULL``,
WAL, the writer's cache), committed every ``--part`` rows, in three orders:

- the file's order (how a chunked import applied them): the same-run baseline;
- sorted within windows of ``--window`` lines (how a large import applies them now);
- sorted as a whole (the floor: every leaf written about once).

Only the inserts and commits are timed (the numbers are parsed first, untimed); a
passive checkpoint every 25 commits keeps the WAL as the appliance's checkpointer does.

Run: ``.venv/bin/python bench/bench_contacts_order.py [--lines 1000000] [--runs 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.imports.chunk import parse_chunk  # noqa: E402
from appliance.imports.windows import Window  # noqa: E402
from appliance.store.schema import migrate, open_connection  # noqa: E402
from tests.imports.corpus import make_corpus  # noqa: E402

Rows = list[tuple[str, str | None]]


def numbers_by_line_windows(lines: int, window: int) -> list[Rows]:
    """Each window's distinct numbers, in the order their lines come."""
    text = make_corpus(lines, seed=43, header=False, bare_share=0.0).text()
    windows: list[Rows] = []
    line = offset = seen = 0
    while line < lines:
        chunk = parse_chunk(1, text, line, offset, window, "TR", seen)
        outcome = Window(1, line)
        outcome.add(chunk)
        windows.append(list(outcome.names.items()))
        line, offset, seen = chunk.to_processed, chunk.to_offset, seen + len(chunk.rows)
    return windows


def insert_rate(rows: Rows, part: int, tmp: Path) -> float:
    path = str(tmp / f"contacts-{time.monotonic_ns()}.db")
    migrate(path)
    conn = open_connection(path)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'bench', 0);"
                 " INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0)")
    sql = ("INSERT INTO contacts (list_id, msisdn, name, job_id, created_at)"
           " VALUES (1, ?, ?, 1, 0) ON CONFLICT (list_id, msisdn) DO NOTHING")
    started = time.perf_counter()
    for n, start in enumerate(range(0, len(rows), part)):
        with conn:
            conn.executemany(sql, rows[start:start + part])
        if n % 25 == 24:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    rate = len(rows) / (time.perf_counter() - started)
    conn.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--window", type=int, default=100_000)
    ap.add_argument("--part", type=int, default=2_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    windows = numbers_by_line_windows(args.lines, args.window)
    # A number repeated across windows is inserted once and then conflicts, as in an import.
    orders = {
        "file order (baseline)": [r for w in windows for r in w],
        f"sorted in windows of {args.window:,} lines": [r for w in windows for r in sorted(w)],
        "sorted as a whole": sorted(r for w in windows for r in w),
    }
    results: dict[str, list[float]] = {name: [] for name in orders}
    with tempfile.TemporaryDirectory() as tmp_s:
        for _ in range(args.runs):
            for name, rows in orders.items():
                results[name].append(insert_rate(rows, args.part, Path(tmp_s)))
    base = statistics.median(results["file order (baseline)"])
    count = len(orders["sorted as a whole"])
    print(f"{count:,} rows into contacts, a commit every {args.part:,}, median of {args.runs}:")
    for name, rates in results.items():
        median = statistics.median(rates)
        print(f"  {name:<36} {median:>10,.0f} rows/s   ratio {median / base:.2f}")


if __name__ == "__main__":
    main()
