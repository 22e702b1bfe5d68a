"""Delivery-report benchmarks, each beside a baseline from the same run.

- Callback throughput and latency: signed ``http``-kind reports POSTed by concurrent
  clients to ``/callbacks/gw`` of a real server (verify, store raw, file, try to
  apply, fsync'd group commit, ``synchronous=FULL``), against (a) a bare Starlette
  endpoint that reads the body and answers 200 and (b) the naive store-first
  handler: one ``INSERT`` and one ``COMMIT`` per callback on its own apsw connection
  (``synchronous=FULL``), in a worker thread.
- The DLR-6 price: the sender's batch unit (500 ``SUBMITTED`` updates) with and
  without :func:`apply_waiting_for_refs` over the same 500 refs, half of which have a
  report waiting.
- The summary behind ``/api/stats`` and ``appliance doctor`` over 200,000 messages,
  against a bare ``count(*)`` over the same created_at range.

Medians of ``--runs`` runs. Run: ``.venv/bin/python bench/bench_reports.py``
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.config import Settings  # noqa: E402
from appliance.ops.observability.summary import summary  # noqa: E402
from appliance.providers.http_json import body_signature  # noqa: E402
from appliance.reports.apply import apply_waiting_for_refs, receive  # noqa: E402
from appliance.reports.inbox import InboxReport, RawCallback  # noqa: E402
from appliance.store import Store  # noqa: E402
from appliance.store.rollups import fill  # noqa: E402
from tests.harness import Server, free_port, wait_for  # noqa: E402

SECRET = "bench-secret"
HOUR = 3_600_000

BARE_APP = """
import sys, threading, uvicorn, anyio.to_thread, apsw
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

store = sys.argv[2] == "store"
if store:
    conn = apsw.Connection(sys.argv[3])
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, body BLOB)")

lock = threading.Lock()

def insert(body):
    with lock, conn:
        conn.execute("INSERT INTO raw (body) VALUES (?)", (body,))

async def callback(request):
    body = await request.body()
    if store:
        await anyio.to_thread.run_sync(insert, body)
    return Response(b"", status_code=200)

app = Starlette(routes=[Route("/callbacks/gw", callback, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
            log_level="warning", access_log=False)
"""


def signed(i: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"ref": f"BENCH{i:08d}", "status": "delivered",
                       "reported_at": "2026-01-01T00:00:00Z"}).encode()
    return body, {"Content-Type": "application/json", "X-Signature": body_signature(body, SECRET)}


def hammer(url: str, n: int, concurrency: int, offset: int) -> tuple[float, list[float]]:
    """(requests per second, latencies in ms) for ``n`` POSTs from ``concurrency``
    threads, each with its own keep-alive client (httpx's async pool is slower than the
    servers measured here)."""
    latencies: list[float] = []
    counter = itertools.count(offset)
    stop = offset + n
    lock = threading.Lock()

    def worker() -> None:
        mine: list[float] = []
        with httpx.Client(timeout=60) as client:
            while (i := next(counter)) < stop:
                body, headers = signed(i)
                t = time.perf_counter()
                r = client.post(url, content=body, headers=headers)
                mine.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: {r.status_code} {r.text}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return n / (time.perf_counter() - start), latencies


def answering(url: str, status: int, what: str, timeout_s: float = 30) -> None:
    """Wait until a POST of ``{}`` to ``url`` gets ``status``: the server is up."""

    def up() -> bool:
        try:
            return httpx.post(url, content=b"{}").status_code == status
        except httpx.HTTPError:
            return False

    wait_for(up, timeout_s, message=what)


def bare_server(mode: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port), mode,
                             str(tmp / f"bare-{mode}.db")])
    url = f"http://127.0.0.1:{port}/callbacks/gw"
    answering(url, 200, f"bare {mode} server")
    return proc, url


def callbacks(runs: int, n: int, concurrency: int, tmp: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    data_dir = tmp / "data"
    data_dir.mkdir()
    config = tmp / "appliance.toml"
    config.write_text('[providers.gw]\nkind = "http"\nbase_url = "http://127.0.0.1:9"\n'
                      f'secret = "{SECRET}"\n')
    server = Server(data_dir, config=config).start()
    targets: list[tuple[str, str, Callable[[], object]]] = [
        ("appliance", server.url + "/callbacks/gw", server.stop)]
    for mode in ("bare", "store"):
        proc, url = bare_server(mode, tmp)
        targets.append((mode, url, proc.terminate))
    try:
        for name, url, _ in targets:
            rates, p50s, p99s = [], [], []
            for run in range(runs):
                rate, lat = hammer(url, n, concurrency, offset=run * n)
                lat.sort()
                rates.append(rate)
                p50s.append(lat[len(lat) // 2])
                p99s.append(lat[min(len(lat) - 1, int(len(lat) * 0.99))])
            out[name] = {"per_s": statistics.median(rates), "p50_ms": statistics.median(p50s),
                         "p99_ms": statistics.median(p99s)}
    finally:
        for _, _, stop in targets:
            stop()
    return out


def seed_messages(conn: apsw.Connection, count: int, now: int) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('bench', 0)")
    states = ["DELIVERED"] * 8 + ["FAILED", "SUBMITTED"]
    conn.executemany(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, next_attempt_at,"
        " created_at, updated_at, submitted_at) VALUES (?, 1, 'gw', ?, 'b', ?, 0, ?, ?, ?)",
        ((f"M{i:09d}", f"+90532{i:07d}", states[i % 10], now - (i % 40 + 7) * HOUR, now, now)
         for i in range(count)))


def filing(raw: RawCallback, reports: list[InboxReport]) -> Callable[[apsw.Connection], object]:
    return lambda c: receive(c, raw, reports, None, 1)


def apply_price(runs: int, tmp: Path) -> dict[str, float]:
    """ms per 500-message batch: the sender's record unit with and without DLR-6."""
    store = Store.open(str(tmp / "apply.db"))
    raw = RawCallback("gw", "POST", "application/json", "", b"{}")
    with_apply: list[float] = []
    without: list[float] = []
    try:
        for run in range(runs * 2):
            refs = [f"B{run:03d}{i:05d}" for i in range(500)]
            waiting = [InboxReport("gw", r, "", "delivered", 1, "DELIVERED") for r in refs[::2]]
            store.writer.call(filing(raw, waiting))

            def seed(c: apsw.Connection, refs: list[str] = refs) -> None:
                c.executemany(
                    "INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
                    " next_attempt_at, created_at, updated_at) VALUES (?, 1, 'gw', ?, 'b',"
                    " 'SENDING', 0, 0, 0)", ((r, f"+9{r}") for r in refs))

            if run == 0:
                store.writer.call(lambda c: c.execute(
                    "INSERT INTO accounts (name, created_at) VALUES ('b', 0)"))
            store.writer.call(seed)
            apply = run % 2 == 0

            def record(c: apsw.Connection, refs: list[str] = refs, apply: bool = apply) -> None:
                for r in refs:
                    c.execute("UPDATE messages SET state = 'SUBMITTED', submitted_at = 1"
                              " WHERE ref = ? AND state = 'SENDING'", (r,))
                if apply:
                    apply_waiting_for_refs(c, refs, 2)

            t = time.perf_counter()
            store.writer.call(record)
            (with_apply if apply else without).append((time.perf_counter() - t) * 1000)
    finally:
        store.close()
    return {"with_apply_ms": statistics.median(with_apply),
            "record_only_ms": statistics.median(without)}


def summary_price(runs: int, tmp: Path, count: int) -> dict[str, float]:
    now = 1_767_225_600_000
    store = Store.open(str(tmp / "summary.db"))
    try:
        store.writer.call(lambda c: seed_messages(c, count, now))
        store.writer.call(fill)  # what the rollups loop does to messages it has not counted
        settings = Settings()
        ours, bare = [], []
        for _ in range(runs):
            t = time.perf_counter()
            store.readers.call(lambda c: summary(c, settings, now, 1))
            ours.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            store.readers.call(lambda c: c.execute(
                "SELECT count(*) FROM messages WHERE created_at >= ? AND created_at < ?",
                (now - 48 * HOUR, now - 6 * HOUR)).fetchone())
            bare.append((time.perf_counter() - t) * 1000)
    finally:
        store.close()
    return {"summary_ms": statistics.median(ours), "count_ms": statistics.median(bare)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--messages", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cb = callbacks(args.runs, args.requests, args.concurrency, tmp)
        price = apply_price(args.runs, tmp)
        summ = summary_price(args.runs, tmp, args.messages)
    a, b, s = cb["appliance"], cb["bare"], cb["store"]
    print(f"callbacks ({args.requests} x {args.runs} runs, {args.concurrency} clients, medians)")
    print(f"  appliance          {a['per_s']:7.0f}/s  p50 {a['p50_ms']:6.1f} ms"
          f"  p99 {a['p99_ms']:6.1f} ms")
    print(f"  bare starlette     {b['per_s']:7.0f}/s  p50 {b['p50_ms']:6.1f} ms"
          f"  p99 {b['p99_ms']:6.1f} ms   appliance/bare {a['per_s'] / b['per_s']:.2f}")
    print(f"  commit per request {s['per_s']:7.0f}/s  p50 {s['p50_ms']:6.1f} ms"
          f"  p99 {s['p99_ms']:6.1f} ms   appliance/naive {a['per_s'] / s['per_s']:.2f}")
    print(f"DLR-6 on a 500-message batch: {price['with_apply_ms']:.1f} ms with the apply,"
          f" {price['record_only_ms']:.1f} ms without"
          f"   ratio {price['with_apply_ms'] / price['record_only_ms']:.2f}")
    print(f"summary over {args.messages:,} messages: {summ['summary_ms']:.1f} ms,"
          f" bare count(*) {summ['count_ms']:.1f} ms"
          f"   ratio {summ['summary_ms'] / summ['count_ms']:.2f}")


if __name__ == "__main__":
    main()
