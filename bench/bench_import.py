"""Import benchmarks: accept latency, end-to-end rate, peak memory.

Each figure is printed beside a baseline measured in the same run:
- accept latency of a 100k-line (~3 MB) paste vs a bare Starlette endpoint that
  only reads the body and answers 202 (same uvicorn settings): idle, right after the
  previous paste, and while a ``--big``-line import is parsed and applied. The bare
  endpoint is asked in turn with the appliance, request by request, after the same
  pause: on these VMs a request after an idle pause costs the same server 40-70% more
  than one sent straight after the last (``bare, back to back`` is printed too), so
  only a baseline paced like the appliance's samples compares like with like;
- end-to-end import rate (accept to DONE) vs raw ``phonenumbers.parse`` +
  ``is_valid_number`` on the same lines, and vs raw apsw ``executemany`` inserts of
  the same rows into a table with the same unique index (synchronous=FULL);
- peak RSS (VmHWM) of the server process during the 1M-line import.

Run: ``.venv/bin/python bench/bench_import.py [--runs 20] [--big 1000000]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw
import httpx
import phonenumbers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import Server, create_account, free_port, wait_for  # noqa: E402
from tests.imports.corpus import make_corpus  # noqa: E402

BARE_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def accept(request):
    body = await request.body()
    return JSONResponse({"bytes": len(body)}, status_code=202)

app = Starlette(routes=[Route("/import", accept, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
            log_level="warning", access_log=False)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def time_posts(client: httpx.Client, url: str, payload: bytes, runs: int,
               headers_for: object, ctype: str = "text/plain") -> list[float]:
    out = []
    for i in range(runs):
        headers = {"Content-Type": ctype, **headers_for(i)}  # type: ignore[operator]
        t = time.perf_counter()
        resp = client.post(url, content=payload, headers=headers)
        out.append((time.perf_counter() - t) * 1000)
        assert resp.status_code == 202, resp.text
    return out


class Bare:
    """The bare Starlette endpoint, in a process of its own, for the whole run."""

    def __init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/import"
        self.proc = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port)])

        def up() -> bool:
            try:
                return httpx.post(self.url, content=b"x").status_code == 202
            except httpx.HTTPError:
                return False

        wait_for(up, 20, message="bare starlette")
        self.client = httpx.Client(timeout=60)

    def post(self, payload: bytes, ctype: str) -> float:
        t = time.perf_counter()
        resp = self.client.post(self.url, content=payload, headers={"Content-Type": ctype})
        took = (time.perf_counter() - t) * 1000
        assert resp.status_code == 202, resp.text
        return took

    def back_to_back(self, payload: bytes, runs: int, ctype: str = "text/plain") -> list[float]:
        return time_posts(self.client, self.url, payload, runs, lambda i: {}, ctype)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(10)


def appliance_accept(server: Server, key: str, payload: bytes, runs: int,
                     pause_s: float, ctype: str = "text/plain",
                     bare: Bare | None = None) -> tuple[list[float], list[float]]:
    """Accept latency; each job is cancelled at once and, with ``pause_s``, the worker
    is given that long to drop it before the next sample (an idle appliance). With
    ``bare``, the bare endpoint is asked in turn, after the same pause: (ours, bare)."""
    with server.client(key) as c:
        times: list[float] = []
        bare_times: list[float] = []
        for i in range(runs):
            if bare is not None:
                time.sleep(pause_s)
                bare_times.append(bare.post(payload, ctype))
            time.sleep(pause_s)
            t = time.perf_counter()
            resp = c.post("/api/contacts/import?list=bench-accept", content=payload,
                          headers={"Content-Type": ctype,
                                   "Idempotency-Key": f"acc-{ctype}-{pause_s}-{i}"})
            times.append((time.perf_counter() - t) * 1000)
            assert resp.status_code == 202, resp.text
            c.post(f"/api/jobs/{resp.json()['jobId']}/cancel")  # keep the worker out of it
        return times, bare_times


def accept_during_import(server: Server, key: str, payload: bytes, runs: int,
                         big_text: str) -> tuple[list[float], int]:
    """Accept latency while a large import is parsed and applied (up to ``runs``
    samples, each after a 0.3 s pause, as many as fit before it ends; then its job is
    cancelled), and how many of its lines were applied by the last sample, to show it
    ran."""
    with server.client(key) as c:
        resp = c.post("/api/contacts/import?list=bench-during", content=big_text.encode(),
                      headers={"Content-Type": "text/plain"})
        assert resp.status_code == 202, resp.text
        big_id = resp.json()["jobId"]
        wait_for(lambda: c.get(f"/api/jobs/{big_id}").json()["state"] == "RUNNING" or None,
                 60, interval=0.01, message="the large import to start")
        times: list[float] = []
        applied = 0
        for i in range(runs):
            time.sleep(0.3)
            job = c.get(f"/api/jobs/{big_id}").json()
            if job["state"] != "RUNNING":
                break
            applied = int(job["processed"])
            t = time.perf_counter()
            resp = c.post("/api/contacts/import?list=bench-accept", content=payload,
                          headers={"Content-Type": "text/plain",
                                   "Idempotency-Key": f"during-{i}"})
            times.append((time.perf_counter() - t) * 1000)
            assert resp.status_code == 202, resp.text
            c.post(f"/api/jobs/{resp.json()['jobId']}/cancel")
        c.post(f"/api/jobs/{big_id}/cancel")
        return times, applied


def import_rate(server: Server, key: str, text: str, list_name: str) -> tuple[float, float]:
    """(rows/s accept-to-DONE, seconds)."""
    with server.client(key) as c:
        t = time.perf_counter()
        resp = c.post(f"/api/contacts/import?list={list_name}", content=text.encode(),
                      headers={"Content-Type": "text/plain"})
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["jobId"]

        def done() -> dict[str, object] | None:
            job: dict[str, object] = c.get(f"/api/jobs/{job_id}").json()
            return job if job["state"] == "DONE" else None

        job = wait_for(done, 900, interval=0.05, message="import to finish")
        seconds = time.perf_counter() - t
        return int(job["total"]) / seconds, seconds  # type: ignore[call-overload]


def raw_parse_rate(lines: list[str]) -> float:
    t = time.perf_counter()
    for line in lines:
        cell = line.split(",")[0].split(";")[0].split("\t")[0].strip('"')
        with contextlib.suppress(phonenumbers.NumberParseException):
            phonenumbers.is_valid_number(phonenumbers.parse(cell, "TR"))
    return len(lines) / (time.perf_counter() - t)


def raw_insert_rate(rows: int, tmp: Path) -> float:
    conn = apsw.Connection(str(tmp / "raw.db"))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, list_id INTEGER NOT NULL,"
                 " msisdn TEXT NOT NULL, name TEXT, job_id INTEGER, created_at INTEGER NOT NULL,"
                 " UNIQUE (list_id, msisdn))")
    data = [(1, f"+90532{i:07d}", None, 1, 0) for i in range(rows)]
    t = time.perf_counter()
    for start in range(0, rows, 2000):
        with conn:
            conn.executemany("INSERT INTO contacts (list_id, msisdn, name, job_id, created_at)"
                             " VALUES (?, ?, ?, ?, ?) ON CONFLICT (list_id, msisdn) DO NOTHING",
                             data[start:start + 2000])
    rate = rows / (time.perf_counter() - t)
    conn.close()
    return rate


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(p) for p in path.read_text().split()]
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    corpus_100k = make_corpus(100_000, seed=42, bare_share=0.0)  # with names: ~3 MB
    big = make_corpus(args.big, seed=43, header=False, bare_share=0.0)
    payload = corpus_100k.text().encode()
    results: dict[str, object] = {"payload_bytes": len(payload)}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data_dir = tmp / "data"
        data_dir.mkdir()
        server = Server(data_dir).start()
        bare = Bare()
        try:
            key = create_account(data_dir)
            as_json = json.dumps({"list": "bench-accept", "text": corpus_100k.text()}).encode()
            results["json_bytes"] = len(as_json)
            appliance_accept(server, key, payload, 3, pause_s=0.0)  # warm-up, not counted
            ours, paced = appliance_accept(server, key, payload, args.runs, pause_s=0.5,
                                           bare=bare)
            ours_json, paced_json = appliance_accept(server, key, as_json, args.runs,
                                                     pause_s=0.5, ctype="application/json",
                                                     bare=bare)
            busy, _ = appliance_accept(server, key, payload, args.runs, pause_s=0.0)
            straight = bare.back_to_back(payload, args.runs)
            straight_json = bare.back_to_back(as_json, args.runs, ctype="application/json")
            for name, values in (("accept_ms", ours), ("bare_accept_ms", paced),
                                 ("accept_json_ms", ours_json), ("bare_json_ms", paced_json),
                                 ("accept_busy_ms", busy), ("bare_back_to_back_ms", straight),
                                 ("bare_json_back_to_back_ms", straight_json)):
                results[name] = {"median": statistics.median(values),
                                 "p99": percentile(values, .99)}
            rate_100k, _ = import_rate(server, key, corpus_100k.text(), "bench-100k")
            results["import_100k_rows_s"] = rate_100k
            during, applied = accept_during_import(server, key, payload, max(5, args.runs // 2),
                                                   big.text())
            results["accept_during_import_ms"] = {
                "samples": len(during), "lines_applied": applied,
                "median": statistics.median(during) if during else float("nan"),
                "p99": percentile(during, .99) if during else float("nan")}
        finally:
            bare.close()
            server.stop()
        # The large import on a server of its own, so its peak memory is the import's.
        big_dir = tmp / "big"
        big_dir.mkdir()
        server = Server(big_dir).start()
        try:
            key = create_account(big_dir)
            assert server.proc is not None
            results["server_idle_rss_mb"] = peak_rss_mb(server.proc.pid)
            rate_big, secs_big = import_rate(server, key, big.text(), "bench-big")
            results["import_big_rows_s"] = rate_big
            results["import_big_seconds"] = secs_big
            results["server_peak_rss_mb"] = peak_rss_mb(server.proc.pid)
            results["parser_peak_rss_mb"] = [peak_rss_mb(p) for p in children(server.proc.pid)]
        finally:
            server.stop()
        results["raw_parse_rows_s"] = raw_parse_rate(corpus_100k.lines)
        results["raw_insert_rows_s"] = raw_insert_rate(100_000, tmp)

    if args.json:
        print(json.dumps(results))
        return
    a: Any = results["accept_ms"]
    b: Any = results["bare_accept_ms"]
    hot: Any = results["bare_back_to_back_ms"]
    print(f"payload: {len(payload) / 1e6:.1f} MB, 100,000 lines")
    print(f"accept latency  median {a['median']:.1f} ms  p99 {a['p99']:.1f} ms"
          f"   bare starlette, in turn, same pause: median {b['median']:.1f} ms"
          f"  p99 {b['p99']:.1f} ms   ratio {a['median'] / b['median']:.2f}"
          f"   (bare back to back {hot['median']:.1f} ms: ratio"
          f" {a['median'] / hot['median']:.2f})")
    aj: Any = results["accept_json_ms"]
    bj: Any = results["bare_json_ms"]
    hot_json: Any = results["bare_json_back_to_back_ms"]
    print(f"JSON accept ({results['json_bytes'] / 1e6:.1f} MB) median"  # type: ignore[operator]
          f" {aj['median']:.1f} ms  p99 {aj['p99']:.1f} ms   bare starlette, in turn:"
          f" median {bj['median']:.1f} ms   ratio {aj['median'] / bj['median']:.2f}"
          f"   (back to back {hot_json['median']:.1f} ms: ratio"
          f" {aj['median'] / hot_json['median']:.2f})")
    shown: Any = results["accept_busy_ms"]
    print(f"accept latency while the worker is busy with the previous paste: median"
          f" {shown['median']:.1f} ms  p99 {shown['p99']:.1f} ms   ratio to bare back to back"
          f" {shown['median'] / hot['median']:.2f}")
    shown = results["accept_during_import_ms"]
    print(f"accept latency while a {args.big:,}-line import is applied: median"
          f" {shown['median']:.1f} ms  p99 {shown['p99']:.1f} ms"
          f"   ratio to the idle bare, in turn {shown['median'] / b['median']:.2f}"
          f"   ({shown['samples']} samples; {shown['lines_applied']:,} of its lines"
          " applied by the last)")
    parse = float(results["raw_parse_rows_s"])  # type: ignore[arg-type]
    insert = float(results["raw_insert_rows_s"])  # type: ignore[arg-type]
    for label, k in (("100k", "import_100k_rows_s"), (f"{args.big:,}", "import_big_rows_s")):
        r = float(results[k])  # type: ignore[arg-type]
        print(f"import {label}: {r:,.0f} rows/s   raw parse {parse:,.0f}/s (ratio {r / parse:.2f})"
              f"   raw apsw insert {insert:,.0f}/s (ratio {r / insert:.2f})")
    parsers: Any = results["parser_peak_rss_mb"]
    print(f"{args.big:,}-line import on a server of its own: server peak RSS"
          f" {results['server_peak_rss_mb']:.0f} MB (idle {results['server_idle_rss_mb']:.0f} MB);"
          f" parser processes: {', '.join(f'{p:.0f}' for p in parsers) or 'none'} MB")


if __name__ == "__main__":
    main()
