"""The one-file executable: size, cold start, memory.

- Size of ``dist/appliance`` (built with ``make binary`` first if missing).
- Cold start: from ``exec`` to the first ``200`` on ``/healthz``, for the binary
  beside the same appliance run from the virtualenv (``python -m appliance serve``),
  on a fresh data dir each time, with the CPU the process tree had used by then; the
  same-run baselines are a bare Starlette app answering ``/healthz`` under uvicorn from
  the same virtualenv, and ``python -c pass``. ``--cold-only`` stops there.
- RSS (resident memory, the whole process tree) at idle, and under a report flood
  (signed ``http``-kind callbacks from 16 concurrent clients for ``--load-s``
  seconds), binary beside virtualenv; the flood's reports/s are printed too.

Medians of ``--runs`` runs. Run: ``.venv/bin/python bench/bench_binary.py``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.http_json import body_signature  # noqa: E402
from tests.harness import free_port  # noqa: E402

SECRET = "bench-secret"
TICKS = os.sysconf("SC_CLK_TCK")
# The baseline server: what any Starlette app pays to answer its first request.
BARE = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

async def healthz(request):
    return PlainTextResponse("ok")

app = Starlette(routes=[Route("/healthz", healthz)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[sys.argv.index("--port") + 1]),
            log_level="warning")
"""


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its living descendants so far."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        pids += [int(c) for c in children]
    return total / TICKS


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the one-file bootloader runs
    the real process as its child)."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        pids += [int(c) for c in children]
    return total / 1024


class Started:
    def __init__(self, cmd: list[str], workdir: Path) -> None:
        data = workdir / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "appliance.toml"
        config.write_text(f'[providers.gw]\nkind = "http"\nbase_url = "http://127.0.0.1:9"\n'
                          f'secret = "{SECRET}"\n')
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [*cmd, "serve", "--data-dir", str(data), "--port", str(self.port),
             "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "APPLIANCE_LOG_LEVEL": "warning"}, cwd=workdir)
        with httpx.Client(timeout=1) as client:
            while True:
                try:
                    if client.get(self.url + "/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if self.proc.poll() is not None:
                    raise SystemExit(f"{cmd} exited with {self.proc.returncode}")
                time.sleep(0.005)
        self.cold_start_s = time.perf_counter() - self.started
        self.cold_cpu_s = tree_cpu_s(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def flood(url: str, seconds: float, clients: int = 16) -> int:
    done = 0
    deadline = time.monotonic() + seconds

    async def client(i: int) -> None:
        nonlocal done
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                body = json.dumps({"ref": f"F{i}-{n}", "status": "delivered",
                                   "reported_at": "2026-01-01T00:00:00Z"}).encode()
                r = await c.post("/callbacks/gw", content=body, headers={
                    "Content-Type": "application/json",
                    "X-Signature": body_signature(body, SECRET)})
                if r.status_code == 200:
                    done += 1

    await asyncio.gather(*(client(i) for i in range(clients)))
    return done


def cold_start(cmd: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = Started(cmd, Path(tmp))
        srv.stop()
    return {"cold_start_s": srv.cold_start_s, "cold_cpu_s": srv.cold_cpu_s}


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def measure(cmd: list[str], load_s: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = Started(cmd, Path(tmp))
        try:
            time.sleep(2.0)
            idle = tree_rss_mb(srv.proc.pid)
            peak = 0.0
            stop = False

            async def sample() -> None:
                nonlocal peak
                while not stop:
                    peak = max(peak, tree_rss_mb(srv.proc.pid))
                    await asyncio.sleep(0.2)

            async def loaded() -> int:
                nonlocal stop
                sampler = asyncio.create_task(sample())
                n = await flood(srv.url, load_s)
                stop = True
                await sampler
                return n

            reports = asyncio.run(loaded())
        finally:
            srv.stop()
    return {"cold_start_s": srv.cold_start_s, "cold_cpu_s": srv.cold_cpu_s,
            "rss_idle_mb": idle, "rss_load_mb": peak, "reports_per_s": reports / load_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load-s", type=float, default=10.0)
    parser.add_argument("--binary", type=Path, default=ROOT / "dist" / "appliance")
    parser.add_argument("--before", type=Path, default=None,
                        help="another build to start in turn with the others (the code before)")
    parser.add_argument("--cold-only", action="store_true",
                        help="only the cold starts (no RSS, no report flood)")
    args = parser.parse_args()
    if not args.binary.exists():
        subprocess.run([sys.executable, str(ROOT / "build" / "build_binary.py")], check=True)
    size_mb = args.binary.stat().st_size / 1e6
    print(f"binary: {args.binary} {size_mb:.1f} MB; load average before: {os.getloadavg()}")
    variants = {"binary": [str(args.binary)], "venv": [sys.executable, "-m", "appliance"]}
    if args.before is not None:
        variants["before"] = [str(args.before)]
    results: dict[str, list[dict[str, float]]] = {k: [] for k in [*variants, "bare"]}
    passes: list[float] = []
    for _ in range(args.runs):  # interleaved, so all see the same machine
        for name, cmd in variants.items():
            results[name].append(cold_start(cmd) if args.cold_only
                                 else measure(cmd, args.load_s))
        results["bare"].append(cold_start([sys.executable, "-c", BARE]))
        passes.append(python_pass())

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    def runs(name: str, key: str) -> str:
        return ", ".join(f"{r[key]:.2f}" for r in results[name])

    bare, bare_cpu = med("bare", "cold_start_s"), med("bare", "cold_cpu_s")
    print(f"python -c pass: {statistics.median(passes):.3f} s; bare Starlette app to its"
          f" first 200: {bare:.2f} s ({bare_cpu:.2f} s CPU; runs {runs('bare', 'cold_start_s')})")
    for name in variants:
        wall, cpu = med(name, "cold_start_s"), med(name, "cold_cpu_s")
        print(f"cold start to first 200 on /healthz, {name}: {wall:.2f} s"
              f" (runs {runs(name, 'cold_start_s')}), {wall / bare:.2f}x the bare app;"
              f" CPU by then {cpu:.2f} s, {cpu / bare_cpu:.2f}x")
    b, v = med("binary", "cold_start_s"), med("venv", "cold_start_s")
    print(f"binary / venv: {b / v:.2f}x")
    if args.before is not None:
        print(f"binary / before: {b / med('before', 'cold_start_s'):.2f}x (CPU"
              f" {med('binary', 'cold_cpu_s') / med('before', 'cold_cpu_s'):.2f}x)")
    if not args.cold_only:
        for key, label, unit in (("rss_idle_mb", "RSS at idle", "MB"),
                                 ("rss_load_mb", "RSS under the report flood (peak)", "MB"),
                                 ("reports_per_s", "report flood throughput", "reports/s")):
            b, v = med("binary", key), med("venv", key)
            print(f"{label}: binary {b:.2f} {unit}, venv {v:.2f} {unit} (ratio {b / v:.2f}x)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
