"""SCALE-1: report intake and import rate on PostgreSQL, with one and with two appliance
processes, beside the same figures on SQLite in the same run.

PostgreSQL is a throwaway server (``tests/pg_server.py``) on this machine, started here
with ``fsync = on`` (the tests' server runs without it), so a committed report is on disk
on both backends; the appliance runs ``synchronous = "FULL"`` (``synchronous_commit =
on``) on both.

- **Report intake**: ``CLIENTS`` concurrent clients POST signed ``http``-kind reports,
  each for its own ref (the "unknown report": stored, waiting in the inbox), for
  ``SECONDS``; 2xx answers per second. With two processes, half the clients go to each.
- **Import**: ``LINES``-line pastes from accept to DONE; with two processes, one paste
  to each (two lists), both at once; lines per second over both.

Run: ``.venv/bin/python bench/bench_postgresql.py [--seconds 8] [--lines 50000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.http_json import body_signature  # noqa: E402
from tests.harness import Server, create_account, wait_for  # noqa: E402
from tests.imports.corpus import make_corpus  # noqa: E402
from tests.pg_server import PgServer  # noqa: E402
from tests.reports.support import PROVIDER, SECRET, http_provider_config  # noqa: E402

CLIENTS = 32


class DurablePgServer(PgServer):
    """The tests' throwaway server, with fsync on: figures worth comparing."""

    def _pg_ctl_start(self) -> None:
        import subprocess

        options = " ".join([f"-p {self.port}", "-c listen_addresses=127.0.0.1",
                            f"-c unix_socket_directories={self.root}",
                            "-c shared_buffers=128MB", "-c max_connections=200"])
        subprocess.run(self._cmd(
            str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-l",
            str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start",
        ), check=True, capture_output=True, timeout=90)


def start_servers(tmp: Path, n: int, url: str | None) -> list[Server]:
    if url:
        os.environ["APPLIANCE_DATABASE_URL"] = url
    else:
        os.environ.pop("APPLIANCE_DATABASE_URL", None)
    servers = []
    for i in range(n):
        data = tmp / f"p{i}" / "data"
        data.mkdir(parents=True)
        cfg = http_provider_config(tmp / f"p{i}.toml")
        servers.append(Server(data, config=cfg).start())
    return servers


async def flood(urls: list[str], seconds: float) -> float:
    ok = 0
    stop = time.monotonic() + seconds

    async def client(i: int, base: str) -> None:
        nonlocal ok
        n = 0
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            while time.monotonic() < stop:
                body = json.dumps({"ref": f"B{i}-{n}", "status": "delivered"}).encode()
                r = await c.post(f"/callbacks/{PROVIDER}", content=body, headers={
                    "Content-Type": "application/json",
                    "X-Signature": body_signature(body, SECRET)})
                ok += r.status_code // 100 == 2
                n += 1

    started = time.monotonic()
    await asyncio.gather(*(client(i, urls[i % len(urls)]) for i in range(CLIENTS)))
    return ok / (time.monotonic() - started)


def import_rate(servers: list[Server], key: str, lines: int) -> float:
    corpus = make_corpus(lines, seed=5)
    text = corpus.text()
    jobs = []
    started = time.monotonic()
    for i, srv in enumerate(servers):
        with srv.client(key) as api:
            r = api.post("/api/contacts/import", json={"list": f"l{i}", "text": text})
            assert r.status_code == 202, r.text
            jobs.append((srv, int(r.json()["jobId"])))

    def done() -> bool:
        for srv, job in jobs:
            with srv.client(key) as api:
                if api.get(f"/api/jobs/{job}").json()["state"] != "DONE":
                    return False
        return True

    wait_for(done, 600, interval=0.05, message="the imports")
    return len(servers) * lines / (time.monotonic() - started)


def measure(label: str, n: int, url: str | None, seconds: float, lines: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as d:
        servers = start_servers(Path(d), n, url)
        try:
            key = create_account(servers[0].data_dir)
            intake = asyncio.run(flood([s.url for s in servers], seconds))
            rate = import_rate(servers, key, lines)
        finally:
            for s in servers:
                s.stop()
    print(f"| {label} | {intake:,.0f} reports/s | {rate:,.0f} lines/s |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--lines", type=int, default=50_000)
    args = ap.parse_args()
    pg = DurablePgServer.start()
    try:
        print(f"load {os.getloadavg()[0]:.1f}; {CLIENTS} clients; {args.lines:,}-line imports")
        print("| | report intake | import |\n|---|---|---|")
        measure("SQLite, one process", 1, None, args.seconds, args.lines)
        for n in (1, 2):
            url = pg.create_database(f"bench{n}")
            measure(f"PostgreSQL, {n} process{'es' if n > 1 else ''}", n, url,
                    args.seconds, args.lines)
        print(f"load {os.getloadavg()[0]:.1f}")
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
