"""Durable report intake under ``wrk``, beside a bare endpoint in the same run.

``wrk`` (1 thread, 64 connections, 10 s) POSTs signed ``http``-kind delivery reports,
each with its own ref, to ``/callbacks/gw`` of a real ``appliance serve``
(``synchronous=FULL``: verify, store raw, file in the inbox, try to apply, group
commit, answer), to ``/callbacks/gw`` on the report intake's port of a second server
(``[reports] intake_port``: the HTTP in a process of its own, the writes in the
server's), and to two baselines served by the same uvicorn settings:
- bare Starlette: reads the body, answers 200, stores nothing;
- naive store-first: one INSERT + COMMIT per request (``synchronous=FULL``).
With ``--two-process``, also the second-process intake prototype
(``intake_two_process.py``: HTTP in one process, the write units and commits in
another), and the same two halves in one process (``lean-one``). Afterwards it
checks that each stored at least as many reports as it answered 2xx. Medians of ``--runs`` runs.

``--kind vonage``: the provider is a ``vonage`` one and every body a Vonage delivery
receipt in JSON, signed as Vonage signs its webhooks (``sig`` over the other fields,
HMAC-SHA256: ``bench_pg_scaling.signed_receipt``), instead of the ``http`` kind's
header-signed report. The load average before and after is printed with the figures.

Run: ``.venv/bin/python bench/bench_callbacks_wrk.py`` (needs Debian's ``wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.http_json import body_signature  # noqa: E402
from bench.bench_reports import SECRET, answering, bare_server  # noqa: E402
from tests.harness import Server, free_port  # noqa: E402

LUA = """
local bodies, sigs, n, i = {}, {}, 0, 0
local f = io.open("%(file)s")
for line in f:lines() do
  local tab = string.find(line, "\\t", 1, true)
  n = n + 1
  sigs[n] = string.sub(line, 1, tab - 1)
  bodies[n] = string.sub(line, tab + 1)
end
f:close()
request = function()
  i = i + 1
  local k = ((i - 1) %% n) + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json",
                                  ["X-Signature"] = sigs[k]}, bodies[k])
end
"""


def write_bodies(path: Path, count: int, prefix: str, kind: str = "http") -> None:
    if kind == "vonage":  # signed in the body: the header is sent, and not read
        from bench.bench_pg_scaling import signed_receipt

        stamp = int(time.time())
        with path.open("w") as fh:
            for i in range(count):
                fh.write(f"-\t{signed_receipt(f'{prefix}{i:08d}', stamp)}\n")
        return
    with path.open("w") as fh:
        for i in range(count):
            body = json.dumps({"ref": f"{prefix}{i:08d}", "status": "delivered",
                               "reported_at": "2026-01-01T00:00:00Z"})
            fh.write(f"{body_signature(body.encode(), SECRET)}\t{body}\n")


def run_wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-s", str(script), url], capture_output=True, text=True, check=True)
    text = out.stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", text).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: .*timeout (\d+)", text)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return {
        "rate": rate,
        "total": total,
        "non2xx": int(bad.group(1)) if bad else 0,
        "timeouts": int(errors.group(1)) if errors else 0,
        "p99_ms": float(p99.group(1)) * scale[p99.group(2)] if p99 else float("nan"),
    }


def two_process_server(config: Path, data_dir: Path, *flags: str
                       ) -> tuple[subprocess.Popen[bytes], str]:
    """The second-process intake prototype (``intake_two_process.py``), up and answering."""
    data_dir.mkdir()
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "intake_two_process.py"),
                             str(port), str(config), str(data_dir), *flags])
    url = f"http://127.0.0.1:{port}/callbacks/gw"
    answering(url, 401, "the two-process intake")  # unsigned: refused, so it is up
    return proc, url


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--kind", choices=("http", "vonage"), default="http",
                    help="the provider's kind, and so the bodies and their signature")
    ap.add_argument("--two-process", action="store_true",
                    help="also the second-process intake prototype (intake_two_process.py)")
    ap.add_argument("--only", default="",
                    help="comma-separated targets to measure (appliance, intake, store);"
                         " the bare endpoint is always measured")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(","))) | {"bare"} if args.only else set()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data_dir = tmp / "data"
        data_dir.mkdir()
        config = tmp / "appliance.toml"
        if args.kind == "vonage":
            from bench.bench_pg_scaling import API_KEY, METHOD
            from bench.bench_pg_scaling import SECRET as VONAGE_SECRET

            config.write_text('[providers.gw]\nkind = "vonage"\n'
                              'base_url = "http://127.0.0.1:9"\n'
                              f'api_key = "{API_KEY}"\napi_secret = "unused"\n'
                              f'signature_secret = "{VONAGE_SECRET}"\n'
                              f'signature_method = "{METHOD}"\n')
        else:
            config.write_text('[providers.gw]\nkind = "http"\n'
                              'base_url = "http://127.0.0.1:9"\n'
                              f'secret = "{SECRET}"\n')
        load_before = os.getloadavg()
        server = Server(data_dir, config=config).start()
        intake_dir = tmp / "intake"
        intake_dir.mkdir()
        intake_port = free_port()
        intake_config = tmp / "intake.toml"
        intake_config.write_text(config.read_text()
                                 + f"\n[reports]\nintake_port = {intake_port}\n")
        intake = Server(intake_dir, config=intake_config).start()
        intake_url = f"http://127.0.0.1:{intake_port}/callbacks/gw"
        answering(intake_url, 401, "the report intake")
        procs = []
        targets = {"appliance": server.url + "/callbacks/gw", "intake": intake_url}
        for mode in ("bare", "store"):
            proc, url = bare_server(mode, tmp)
            procs.append(proc)
            targets[mode] = url
        if args.two_process:
            for name, flags in (("two-process", ()), ("lean-one", ("--one-process",))):
                proc, url = two_process_server(config, tmp / name, *flags)
                procs.append(proc)
                targets[name] = url
        if only:
            targets = {k: v for k, v in targets.items() if k in only}
        results: dict[str, list[dict[str, float]]] = {k: [] for k in targets}
        try:
            for run in range(args.runs):
                for name, url in targets.items():
                    bodies = tmp / f"bodies-{name}-{run}.txt"
                    write_bodies(bodies, 150_000, f"W{run}{name[:2].upper()}", args.kind)
                    script = tmp / f"post-{name}-{run}.lua"
                    script.write_text(LUA % {"file": bodies})
                    results[name].append(run_wrk(url, script, args.seconds, args.connections))
        finally:
            server.stop()
            intake.stop()
            for proc in procs:
                proc.terminate()
        checked = {k: v for k, v in (("appliance", data_dir), ("intake", intake_dir))
                   if k in targets}
        if args.two_process:
            checked["two-process"] = tmp / "two-process"
            checked["lean-one"] = tmp / "lean-one"
        durable = {}
        for name, where in checked.items():
            acked = sum(r["total"] - r["non2xx"] for r in results[name])
            conn = sqlite3.connect(where / "appliance.db")
            stored = conn.execute("SELECT count(*) FROM raw_reports").fetchone()[0]
            conn.close()
            durable[name] = (acked, stored)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    print(f"wrk -t1 -c{args.connections} -d{args.seconds}s, {args.kind} bodies, median of"
          f" {args.runs} runs, synchronous=FULL; load average before {load_before},"
          f" after {os.getloadavg()}")
    def ratio(a: str, b: str) -> str:
        return f"{med(a, 'rate') / med(b, 'rate'):.2f}" if a in targets and b in targets \
            else "-"

    for name in targets:
        print(f"{name:10s} {med(name, 'rate'):9,.0f} req/s   p99 {med(name, 'p99_ms'):7.1f} ms"
              f"   non-2xx {sum(r['non2xx'] for r in results[name])}")
    print(f"appliance / bare: {ratio('appliance', 'bare')}"
          f"   appliance / commit-per-request: {ratio('appliance', 'store')}")
    print(f"intake port / bare: {ratio('intake', 'bare')}"
          f"   intake port / appliance's own port: {ratio('intake', 'appliance')}")
    if args.two_process:
        print(f"two-process / bare: {med('two-process', 'rate') / med('bare', 'rate'):.2f}"
              f"   two-process / appliance: "
              f"{med('two-process', 'rate') / med('appliance', 'rate'):.2f}"
              f"   lean-one (the same halves in one process) / bare: "
              f"{med('lean-one', 'rate') / med('bare', 'rate'):.2f}")
    for name, (acked, stored) in durable.items():
        print(f"acknowledged (2xx) by {name}: {acked:,}; raw reports stored: {stored:,}"
              f" -> {'OK' if stored >= acked else 'LOST REPORTS'}")


if __name__ == "__main__":
    main()
