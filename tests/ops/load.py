"""Sustained write load for the operations tests: imports and a report flood.

Both run in threads against a real server and remember what the server
acknowledged (and when), so a test can check that a backup, or a restart after
SIGTERM, kept every acknowledged row.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import httpx

from tests.harness import Server
from tests.reports.support import post_report


def numbers(start: int, count: int) -> str:
    """``count`` distinct Turkish mobile numbers, one a line."""
    return "\n".join(f"+90532{n:07d}" for n in range(start, start + count))


def read_db(data_dir: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(data_dir / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


@dataclass
class ReportFlood:
    """Posts unmatched reports ``FLOOD-<n>`` as fast as the server takes them."""

    server: Server
    threads: int = 4
    acked: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, ref)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 0
    _workers: list[threading.Thread] = field(default_factory=list)

    def _ref(self) -> str:
        with self._lock:
            self._next += 1
            return f"FLOOD-{self._next}"

    def _run(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=10) as client:
            while not self._stop.is_set():
                ref = self._ref()
                try:
                    resp = post_report(client, {"ref": ref, "status": "delivered",
                                                "reported_at": "2026-01-01T00:00:00Z"})
                except httpx.HTTPError:
                    self.errors += 1
                    time.sleep(0.01)
                    continue
                if resp.status_code == 200:
                    with self._lock:
                        self.acked.append((time.monotonic(), ref))

    def start(self) -> ReportFlood:
        for _ in range(self.threads):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self._workers.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(15)

    def acked_before(self, moment: float) -> set[str]:
        with self._lock:
            return {ref for at, ref in self.acked if at < moment}

    def count(self) -> int:
        with self._lock:
            return len(self.acked)


@dataclass
class ImportLoad:
    """Submits imports of ``lines`` new numbers each, one after another."""

    server: Server
    key: str
    lines: int = 5000
    jobs: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _worker: threading.Thread | None = None

    def _run(self) -> None:
        n = 0
        with self.server.client(self.key) as api:
            while not self._stop.is_set():
                try:
                    resp = api.post("/api/contacts/import", json={
                        "list": "load", "text": numbers(n * self.lines, self.lines)})
                except httpx.HTTPError:
                    time.sleep(0.05)
                    continue
                if resp.status_code == 202:
                    self.jobs.append(int(resp.json()["jobId"]))
                    n += 1
                time.sleep(0.05)

    def start(self) -> ImportLoad:
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.join(30)
