"""Backup benchmark: ``appliance backup`` of a ~1 GB live database under write load.

Builds a database of ``--size-mb`` (default 1024): contact lists (10 lists, a few
million numbers, with their unique index) and the raw import payloads they came
from. Then, with the appliance's writer committing a steady stream of small units
(a report-flood-like load: one ``raw_reports`` row per unit, ``synchronous=FULL``),
it measures

- the time of ``appliance backup`` (a separate process, as from cron), beside a
  plain ``cp``-style copy + fsync of the same file (the baseline: what copying the
  bytes costs, with no consistency and no check);
- the writer's p99 commit latency while the backup runs, beside the p99 over the
  same length of time without a backup, in the same run.

Medians of ``--runs`` runs. Run: ``.venv/bin/python bench/bench_backup.py``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.store.schema import migrate  # noqa: E402
from appliance.store.sqlite_engine import sqlite_writer  # noqa: E402

PAYLOAD_BYTES = 8 * 1024 * 1024


def build_database(path: Path, size_mb: int) -> float:
    """Fill a fresh appliance database to about ``size_mb``; return seconds taken."""
    started = time.perf_counter()
    migrate(str(path))
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF")
    contacts = max(100_000, size_mb * 1024 * 1024 // 4 // 90)  # ~1/4 of the size
    with conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'bench', 0)")
        for i in range(1, 11):
            conn.execute("INSERT INTO lists (id, account_id, name, created_at)"
                         " VALUES (?, 1, ?, 0)", (i, f"list-{i}"))
        conn.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)"
            " INSERT INTO contacts (list_id, msisdn, name, created_at)"
            " SELECT x % 10 + 1, printf('+90532%07d', x), 'Contact ' || x, x FROM c",
            (contacts,))
    job = 0
    def size() -> int:
        row = conn.execute("SELECT page_count * page_size FROM pragma_page_count(),"
                           " pragma_page_size()").fetchone()
        return int(row[0]) if row else 0

    while size() < size_mb * 1_000_000:
        job += 1
        with conn:
            conn.execute(
                "INSERT INTO import_jobs (id, account_id, list_id, idempotency_key,"
                " payload_sha256, region, state, total, created_at, updated_at)"
                " VALUES (?, 1, 1, ?, 'x', 'TR', 'DONE', 0, 0, 0)", (job, f"k{job}"))
            conn.execute("INSERT INTO import_payloads (job_id, content_type, body, received_at)"
                         " VALUES (?, 'text/plain', randomblob(?), 0)", (job, PAYLOAD_BYTES))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


def report_unit(body: bytes) -> Callable[[apsw.Connection], None]:
    def unit(conn: apsw.Connection) -> None:
        conn.execute(
            "INSERT INTO raw_reports (provider, method, content_type, query, body,"
            " received_at, parsed) VALUES ('gw', 'POST', 'application/json', '', ?, 0, 1)",
            (body,))
    return unit


class Load:
    """A steady stream of small write units through the real writer."""

    def __init__(self, db: Path, per_s: float = 200.0) -> None:
        self.writer = sqlite_writer(str(db))
        self.latencies: list[tuple[float, float]] = []  # (monotonic end, seconds)
        self.writer.commit_listeners.append(
            lambda seconds, units: self.latencies.append((time.monotonic(), seconds)))
        self.per_s = per_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        gap = 1.0 / self.per_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            n += 1
            self.writer.submit(report_unit(f'{{"ref":"B-{n}","status":"delivered"}}'.encode()))
            next_at += gap
            time.sleep(max(0.0, next_at - time.monotonic()))

    def start(self) -> Load:
        self.writer.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.writer.stop()

    def p99_between(self, start: float, end: float) -> tuple[float, int]:
        window = sorted(s for at, s in self.latencies if start <= at <= end)
        if not window:
            return float("nan"), 0
        return window[min(len(window) - 1, int(len(window) * 0.99))], len(window)


def plain_copy(src: Path, dest: Path) -> float:
    started = time.perf_counter()
    shutil.copyfile(src, dest)
    fd = os.open(dest, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - started


def one_run(data: Path, out: Path) -> dict[str, float]:
    db = data / "appliance.db"
    copy_s = plain_copy(db, out / "plain.db")
    (out / "plain.db").unlink()
    load = Load(db).start()
    try:
        time.sleep(1.0)  # warm up
        quiet_start = time.monotonic()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "appliance", "backup", str(out / "b.db"),
                        "--data-dir", str(data)], check=True, capture_output=True, cwd=ROOT)
        backup_s = time.perf_counter() - started
        during_end = time.monotonic()
        # The baseline: as long again, same load, no backup.
        time.sleep(backup_s)
        after_end = time.monotonic()
    finally:
        load.stop()
    p99_during, n_during = load.p99_between(quiet_start, during_end)
    p99_quiet, n_quiet = load.p99_between(during_end, after_end)
    for name in ("b.db", "b.db.manifest.json"):
        (out / name).unlink()
    return {"backup_s": backup_s, "copy_s": copy_s, "p99_during_ms": p99_during * 1000,
            "p99_quiet_ms": p99_quiet * 1000, "commits_during": n_during,
            "commits_quiet": n_quiet}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        data.mkdir()
        out.mkdir()
        build_s = build_database(data / "appliance.db", args.size_mb)
        size = (data / "appliance.db").stat().st_size
        print(f"database: {size / 1e9:.2f} GB, built in {build_s:.0f} s")
        runs = [one_run(data, out) for _ in range(args.runs)]
        for r in runs:
            print("  run: " + ", ".join(f"{k}={v:.3f}" for k, v in r.items()))

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"backup of {size / 1e9:.2f} GB under write load: {med('backup_s'):.1f} s"
          f" (plain copy + fsync {med('copy_s'):.1f} s; ratio"
          f" {med('backup_s') / med('copy_s'):.1f}x)")
    print(f"writer p99 commit latency: {med('p99_during_ms'):.1f} ms during the backup,"
          f" {med('p99_quiet_ms'):.1f} ms without (ratio"
          f" {med('p99_during_ms') / med('p99_quiet_ms'):.2f}x), ~200 units/s")


if __name__ == "__main__":
    main()
