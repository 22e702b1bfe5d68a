"""The sender's own ceiling: a campaign against a provider fake that costs almost nothing.

The fake is nginx (Debian's package) answering every ``POST /messages`` of the ``http``
provider kind with the kind's success answer, ``{"id": "<nginx's $request_id>"}``,
from one worker process with keep-alive, logging off: it needs a few µs a request, so
the figure measures the appliance, not the fake. Per run, alternating:

- **appliance, receipts off**: a campaign of ``--messages`` contacts through a real
  ``appliance serve`` (``synchronous=FULL``, ``concurrency`` = ``--concurrency``); the
  rate is messages over the span from the first ``submitted_at`` to the last (claims,
  ``SENDING`` marks, the HTTP round trip, outcomes, group commits), and, beside it,
  from the campaign's ``202`` to the last message ``SUBMITTED`` (with the expansion);
- **appliance, receipts on**: the same, while a separate process (this script with
  ``--receipts``) reads the database read-only for messages ``SUBMITTED`` and POSTs a
  signed ``delivered`` report for each, one report a request over ``--concurrency``
  keep-alive connections, to ``/callbacks/gw``; the rate is messages from the ``202`` to
  the last one ``DELIVERED`` (every receipt kept raw and applied);
- **baseline**: raw aiohttp (the transport's client) in this process, under uvloop,
  posting the same JSON to the same nginx with ``concurrency`` keep-alive connections,
  nothing stored; beside it raw ``httpx`` the way the transport used it before
  (``concurrency`` one-connection clients), and ``wrk`` against the same nginx, for
  what the fake itself can take on this machine.

Ratios are appliance / raw aiohttp, medians of ``--runs`` runs; the load average is
printed before and after each run.

Run: ``.venv/bin/python bench/bench_send_ceiling.py`` (needs Debian's ``nginx``, ``wrk``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.http_json import body_signature  # noqa: E402
from tests.harness import Server, create_account, free_port, wait_for  # noqa: E402

SECRET = "bench-ceiling-secret"
NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    client_body_temp_path %(tmp)s/nginx-body;
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            default_type application/json;
            return 200 '{"id":"$request_id"}';
        }
    }
}
"""


def start_nginx(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF % {"tmp": tmp, "port": port})
    proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(tmp)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.post(url + "/messages", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 20, message="nginx to answer")
    return proc, url


# -- baselines -----------------------------------------------------------------------

async def raw_httpx(url: str, messages: int, concurrency: int) -> float:
    """The transport's way of sending, without the appliance around it."""
    clients = [httpx.AsyncClient(timeout=30, limits=httpx.Limits(
        max_connections=1, max_keepalive_connections=1)) for _ in range(concurrency)]
    left = iter(range(messages))

    async def worker(client: httpx.AsyncClient) -> None:
        for i in left:
            r = await client.post(url + "/messages", json={
                "ref": f"B{i:025d}", "to": f"+90532{i:07d}", "body": "benchmark",
                "callback_url": "http://127.0.0.1:9/callbacks/gw"},
                headers={"Accept": "application/json", "Authorization": "Bearer k"})
            r.raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    elapsed = time.perf_counter() - started
    for c in clients:
        await c.aclose()
    return messages / elapsed


async def raw_aiohttp(url: str, messages: int, concurrency: int) -> float:
    """The client the transport uses, without the appliance around it: one session
    with ``concurrency`` keep-alive connections, the JSON built by ``json.dumps``."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                    cookie_jar=aiohttp.DummyCookieJar())
    left = iter(range(messages))

    async def worker() -> None:
        for i in left:
            body = json.dumps({"ref": f"B{i:025d}", "to": f"+90532{i:07d}",
                               "body": "benchmark",
                               "callback_url": "http://127.0.0.1:9/callbacks/gw"}).encode()
            async with session.post(url + "/messages", data=body, headers={
                    "Accept": "application/json", "Authorization": "Bearer k",
                    "Content-Type": "application/json"}) as r:
                json.loads(await r.read())
                r.raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await session.close()
    return messages / elapsed


def wrk_rate(url: str, concurrency: int, seconds: int = 5) -> float:
    if shutil.which("wrk") is None:
        return float("nan")
    out = subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", url + "/messages"],
                         capture_output=True, text=True, check=True).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(found.group(1)) if found else float("nan")


# -- the receipts process -------------------------------------------------------------

async def _post_loop(host: str, port: int, queue: asyncio.Queue[bytes | None]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    while (request := await queue.get()) is not None:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 2"):
            raise SystemExit(f"a receipt was refused: {head[:80]!r}")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        await reader.readexactly(length)
    writer.close()


async def receipts(db: str, url: str, campaign_id: int, total: int, concurrency: int) -> None:
    """POST a signed ``delivered`` report for each message of the campaign as soon as it
    is ``SUBMITTED`` in the database: what a provider's receipt flow does, from another
    process, one report a request."""
    host, port = url.removeprefix("http://").split(":")
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    posters = [asyncio.create_task(_post_loop(host, int(port), queue))
               for _ in range(concurrency)]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    seen: set[int] = set()
    while len(seen) < total:
        rows = conn.execute("SELECT id, ref FROM messages WHERE campaign_id = ?"
                            " AND state = 'SUBMITTED'", (campaign_id,)).fetchall()
        for mid, ref in rows:
            if mid in seen:
                continue
            seen.add(mid)
            body = json.dumps({"ref": ref, "status": "delivered",
                               "reported_at": "2026-01-01T00:00:00Z"}).encode()
            queue.put_nowait(
                b"POST /callbacks/gw HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json"
                b"\r\nX-Signature: %s\r\nContent-Length: %d\r\n\r\n%s"
                % (host.encode(), body_signature(body, SECRET).encode(), len(body), body))
        await asyncio.sleep(0.02)
    for _ in posters:
        queue.put_nowait(None)
    await asyncio.gather(*posters)


# -- the appliance --------------------------------------------------------------------

def thread_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of the process's main thread (the event loop: HTTP, the sender) and of
    its other threads together (the writer, readers, the checkpointer)."""
    tick = os.sysconf("SC_CLK_TCK")
    main = rest = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except FileNotFoundError:
            continue  # a thread that just ended
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if int(tid) == pid:
            main += cpu
        else:
            rest += cpu
    return main, rest


def appliance_run(api: httpx.Client, db: Path, url: str, pid: int, messages: int, run: str,
                  concurrency: int, with_receipts: bool) -> dict[str, float]:
    numbers = "".join(f"+905{run}{i:07d}\n" for i in range(messages))
    job = api.post("/api/contacts/import", json={"list": f"bench-{run}", "text": numbers})
    job.raise_for_status()
    wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 300)
    if api.get(job.json()["poll"]).json()["inserted"] != messages:
        raise SystemExit(f"the import did not take every number: {job.json()}")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    cpu_before = thread_cpu(pid)
    started = time.perf_counter()
    c = api.post("/api/campaigns", json={"list": f"bench-{run}", "body": "benchmark"})
    c.raise_for_status()
    cid = int(c.json()["campaignId"])
    worker = None
    if with_receipts:
        worker = subprocess.Popen([sys.executable, __file__, "--receipts", str(db), url,
                                   str(cid), str(messages), str(concurrency)])
    final = "DELIVERED" if with_receipts else "SUBMITTED"

    def done() -> bool:
        n = conn.execute("SELECT count(*) FROM messages WHERE campaign_id = ? AND state = ?",
                         (cid, final)).fetchone()[0]
        return int(n) == messages

    wait_for(done, 600, interval=0.02, message=f"all {final}")
    wall = time.perf_counter() - started
    cpu_after = thread_cpu(pid)
    if worker is not None:
        worker.wait(60)
    first, last = conn.execute("SELECT min(submitted_at), max(submitted_at) FROM messages"
                               " WHERE campaign_id = ?", (cid,)).fetchone()
    twice = conn.execute("SELECT count(*) FROM messages WHERE campaign_id = ?"
                         " AND attempts <> 1", (cid,)).fetchone()[0]
    conn.close()
    if twice:
        raise SystemExit(f"{twice} messages were attempted more than once")
    span = max(1, int(last) - int(first)) / 1000
    return {"span": messages / span, "wall": messages / wall,
            "main_us": (cpu_after[0] - cpu_before[0]) / messages * 1e6,
            "rest_us": (cpu_after[1] - cpu_before[1]) / messages * 1e6}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--receipts":
        path, url, cid, total, conc = sys.argv[2:7]
        asyncio.run(receipts(path, url, int(cid), int(total), int(conc)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--no-receipts", action="store_true", help="skip the receipts-on runs")
    args = ap.parse_args()
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        sys.exit("nginx is not installed (apt-get install nginx)")
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as d:
        tmp = Path(d)
        nginx, nginx_url = start_nginx(tmp)
        data = tmp / "data"
        data.mkdir()
        cfg = tmp / "appliance.toml"
        cfg.write_text(f'[providers.gw]\nkind = "http"\nbase_url = "{nginx_url}"\n'
                       f'api_key = "k"\nsecret = "{SECRET}"\nrate_per_s = 1000000\n'
                       f"concurrency = {args.concurrency}\n")
        server = Server(data, config=cfg).start()
        assert server.proc is not None
        pid = server.proc.pid
        db = data / "appliance.db"
        res: dict[str, list[float]] = {k: [] for k in (
            "aiohttp", "httpx", "wrk", "off_span", "off_wall", "on_span", "on_wall", "off_main",
            "off_rest", "on_main", "on_rest")}
        try:
            with server.client(create_account(data, "bench")) as api:
                for run in range(args.runs):
                    # uvloop, as `appliance serve` runs
                    res["aiohttp"].append(uvloop.run(raw_aiohttp(nginx_url, args.messages,
                                                                 args.concurrency)))
                    res["httpx"].append(uvloop.run(raw_httpx(nginx_url, args.messages,
                                                             args.concurrency)))
                    res["wrk"].append(wrk_rate(nginx_url, args.concurrency))
                    off = appliance_run(api, db, server.url, pid, args.messages, f"3{run}",
                                        args.concurrency, False)
                    res["off_span"].append(off["span"])
                    res["off_wall"].append(off["wall"])
                    res["off_main"].append(off["main_us"])
                    res["off_rest"].append(off["rest_us"])
                    line = (f"run {run + 1}: receipts off {off['span']:.0f}/s"
                            f" (CPU {off['main_us']:.0f}+{off['rest_us']:.0f} µs)"
                            f" (202 to all submitted {off['wall']:.0f}/s)")
                    if not args.no_receipts:
                        on = appliance_run(api, db, server.url, pid, args.messages, f"4{run}",
                                           args.concurrency, True)
                        res["on_span"].append(on["span"])
                        res["on_wall"].append(on["wall"])
                        res["on_main"].append(on["main_us"])
                        res["on_rest"].append(on["rest_us"])
                        line += (f"; receipts on {on['wall']:.0f}/s to all delivered"
                                 f" (submitted at {on['span']:.0f}/s)")
                    print(f"{line}; raw aiohttp {res['aiohttp'][-1]:.0f}/s;"
                          f" raw httpx {res['httpx'][-1]:.0f}/s;"
                          f" wrk {res['wrk'][-1]:.0f}/s; load {os.getloadavg()}", flush=True)
        finally:
            server.stop()
            nginx.send_signal(signal.SIGTERM)
            nginx.wait(10)

    def med(key: str) -> float:
        return statistics.median(res[key]) if res[key] else float("nan")

    base = med("aiohttp")
    print(f"\nsend ceiling against nginx, {args.messages} messages, concurrency"
          f" {args.concurrency}, medians of {args.runs} runs, synchronous=FULL:")
    print(f"  appliance, receipts off (first to last submitted_at): {med('off_span'):,.0f}"
          f" messages/s  ({med('off_span') / base:.2f} of raw aiohttp)")
    print(f"  appliance, receipts off (campaign 202 to all SUBMITTED): {med('off_wall'):,.0f}/s")
    print(f"    server CPU a message: event loop {med('off_main'):.0f} µs, other threads"
          f" (writer, readers) {med('off_rest'):.0f} µs")
    if not args.no_receipts:
        print(f"  appliance, receipts on (campaign 202 to all DELIVERED): {med('on_wall'):,.0f}"
              f" messages/s  ({med('on_wall') / base:.2f} of raw aiohttp)")
        print(f"    server CPU a message: event loop {med('on_main'):.0f} µs, other threads"
              f" {med('on_rest'):.0f} µs")
    print(f"  baseline, raw aiohttp to the same nginx, nothing stored: {base:,.0f}/s")
    print(f"  (raw httpx, the client the transport used before: {med('httpx'):,.0f}/s)")
    print(f"  nginx alone under wrk -c{args.concurrency}: {med('wrk'):,.0f} req/s")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
