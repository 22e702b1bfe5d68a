"""A large import's memory: the whole process tree, sampled, beside same-run baselines.

A real ``appliance serve`` (the harness's, ``synchronous=FULL``) imports a
``--lines``-line list (1,000,000 by default: ~26 MB of text with Turkish names, the
corpus of ``bench_import.py``), accept to ``DONE``. Every ``--every`` seconds (50 ms)
a thread walks the server's process tree (``/proc/PID/task/*/children``, so the
parser processes and anything else the server starts are counted) and reads each
process's RSS (``/proc/PID/statm``) and PSS (``/proc/PID/smaps_rollup``). It prints,
per run and as medians of ``--runs``:

- the peak of the tree's summed RSS and of its summed PSS, and the peak of each
  process (its own ``VmHWM``, which no sampling can miss) by role;
- rows/s, accept to ``DONE``;
- the same-run baselines: the tree's RSS and PSS when the server is idle before the
  import (the peak is printed as a ratio to it), and the bare parser's rows/s (the
  parts a parser process sends, made in this process on one core over the first
  ``--bare-lines`` lines of the same file, with no server, no writer, no pipes).

RSS counts a page shared by two processes twice; PSS splits it between them, so the
summed PSS is what the tree costs the machine. A child caught between its fork and its
exec (still the server's command line; CPython forks with vfork, so it is the server's
own memory) is not counted: it would count the server twice for a millisecond.
``docs/benchmarks.md`` says which one the goal is read against, and why.

With ``--baseline DIR`` (a checkout of other code, e.g. the commit before: ``git
archive``), each run imports the same file on that code's server too, the two in turn
(each first in every other run), and the medians are printed as ratios.

Run: ``.venv/bin/python bench/bench_import_memory.py [--runs 3] [--lines 1000000]
[--baseline DIR]`` (``--parsers N`` sets ``[import] parser_processes``;
``--memory-limit-mb`` stands for a cgroup's limit through ``[import] memory_limit_mb``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.imports.windows import Request, parts_of  # noqa: E402
from tests.harness import Server, create_account, wait_for  # noqa: E402
from tests.imports.corpus import make_corpus  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024


def tree(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for path in Path(f"/proc/{p}/task").glob("*/children"):
                todo += [int(c) for c in path.read_text().split()]
        except OSError:
            continue
    return found


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def pss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def hwm_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def role(pid: int, root: int) -> str:
    if pid == root:
        return "server"
    cmd = command(pid).replace(b"\0", b" ").decode()
    if not cmd:
        return "gone"
    if "resource_tracker" in cmd:
        return "resource tracker"
    if "forkserver" in cmd:
        return "fork server"
    return "parser" if "multiprocessing" in cmd or "appliance" in cmd else "other"


@dataclass
class Sampler:
    """Samples the tree under ``root`` every ``every`` seconds until stopped."""

    root: int
    every: float
    peak_rss: int = 0
    peak_pss: int = 0
    server_peak_rss: int = 0  # the server's own RSS, sampled
    samples: int = 0
    most_processes: int = 0
    hwm: dict[int, tuple[str, int]] = field(default_factory=dict)
    at_peak: list[tuple[str, int]] = field(default_factory=list)  # (role, RSS) at the peak
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> tuple[int, int]:
        rss = pss = 0
        server_command = command(self.root)
        # A child still showing the server's command line has not reached its exec: it
        # is the server's memory (with vfork the very same pages), not counted again.
        pids = [p for p in tree(self.root) if p == self.root or command(p) != server_command]
        each: list[tuple[str, int]] = []
        for pid in pids:
            try:
                own = rss_bytes(pid)
                if pid == self.root:
                    self.server_peak_rss = max(self.server_peak_rss, own)
                rss += own
                pss += pss_bytes(pid)
                self.hwm[pid] = (role(pid, self.root), hwm_bytes(pid))
                each.append((self.hwm[pid][0], own))
            except OSError:
                continue  # ended between the walk and the read
        if rss > self.peak_rss:
            self.at_peak = each
        self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
        self.most_processes = max(self.most_processes, len(pids))
        self.samples += 1
        return rss, pss

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()


def bare_parse_rate(text: str, lines: int) -> float:
    """Rows/s of the parser's own work (windows, parts) over the first ``lines`` lines,
    in this process, on one core."""
    request = Request(1, 1, "TR", 0, 0, 0, 2000, lines, 100_000)
    t = time.perf_counter()
    for _part in parts_of(request, text):
        pass
    return lines / (time.perf_counter() - t)


def config_file(tmp: Path, parsers: int | None, limit_mb: int | None) -> Path | None:
    rows = [f"parser_processes = {parsers}"] if parsers is not None else []
    rows += [f"memory_limit_mb = {limit_mb}"] if limit_mb is not None else []
    if not rows:
        return None
    path = tmp / "appliance.toml"
    path.write_text("[import]\n" + "\n".join(rows) + "\n")
    return path


def one_run(tmp: Path, name: str, body: bytes, every: float, config: Path | None,
            code: Path | None) -> dict[str, object]:
    """One import on a server of its own (from the checkout ``code`` when given)."""
    data_dir = tmp / f"run-{name}"
    data_dir.mkdir()
    env = {"PYTHONPATH": str(code)} if code is not None else None
    server = Server(data_dir, config=config, env=env).start()
    try:
        key = create_account(data_dir)
        assert server.proc is not None
        root = server.proc.pid
        idle = Sampler(root, every)
        idle_rss, idle_pss = [], []
        for _ in range(10):
            rss, pss = idle.sample()
            idle_rss.append(rss)
            idle_pss.append(pss)
            time.sleep(every)
        sampler = Sampler(root, every).start()
        with server.client(key) as c:
            t = time.perf_counter()
            resp = c.post("/api/contacts/import?list=bench-memory", content=body,
                          headers={"Content-Type": "text/plain"})
            assert resp.status_code == 202, resp.text
            job_id = resp.json()["jobId"]
            accepted = sampler.sample()
            accept_server = sampler.server_peak_rss

            def done() -> dict[str, object] | None:
                job: dict[str, object] = c.get(f"/api/jobs/{job_id}").json()
                assert job["state"] not in ("FAILED", "CANCELLED"), job
                return job if job["state"] == "DONE" else None

            job = wait_for(done, 900, interval=0.05, message="import to finish")
            seconds = time.perf_counter() - t
        sampler.stop()
        by_role: dict[str, list[float]] = {}
        for name, peak in sampler.hwm.values():
            by_role.setdefault(name, []).append(peak / MB)
        return {"rows_s": int(str(job["total"])) / seconds, "seconds": seconds,
                "peak_rss_mb": sampler.peak_rss / MB, "peak_pss_mb": sampler.peak_pss / MB,
                "idle_rss_mb": statistics.median(idle_rss) / MB,
                "idle_pss_mb": statistics.median(idle_pss) / MB,
                "accept_peak_rss_mb": accepted[0] / MB,
                "server_accept_peak_mb": accept_server / MB,
                "server_peak_mb": sampler.server_peak_rss / MB,
                "at_peak_mb": [(name, own / MB) for name, own in sampler.at_peak],
                "samples": sampler.samples, "processes": sampler.most_processes,
                "hwm_mb": {k: sorted(v, reverse=True) for k, v in by_role.items()}}
    finally:
        server.stop()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def show(label: str, run: dict[str, object]) -> None:
    hwm = run["hwm_mb"]
    at_peak = run["at_peak_mb"]
    assert isinstance(hwm, dict) and isinstance(at_peak, list)
    peaks = "; ".join(f"{k} {', '.join(f'{v:.0f}' for v in vs)}" for k, vs in sorted(hwm.items()))
    print(f"{label}: {run['rows_s']:,.0f} rows/s (bare parser {run['bare_parse_rows_s']:,.0f}/s);"
          f" tree peak RSS {run['peak_rss_mb']:.0f} MB, PSS {run['peak_pss_mb']:.0f} MB (idle"
          f" {run['idle_rss_mb']:.0f} / {run['idle_pss_mb']:.0f} MB); server"
          f" {run['server_accept_peak_mb']:.0f} MB by the 202, {run['server_peak_mb']:.0f} MB"
          f" at most; per process peak (VmHWM) MB: {peaks}; at the tree's peak:"
          f" {', '.join(f'{k} {v:.0f}' for k, v in at_peak)} MB; {run['processes']} processes,"
          f" {run['samples']} samples; load {run['load']}", flush=True)


def summarise(label: str, runs: list[dict[str, object]], lines: int) -> dict[str, float]:
    def med(key: str) -> float:
        return statistics.median(float(str(r[key])) for r in runs)

    summary = {k: med(k) for k in ("rows_s", "bare_parse_rows_s", "peak_rss_mb", "peak_pss_mb",
                                   "idle_rss_mb", "idle_pss_mb")}
    print(f"{label}, median of {len(runs)}: {lines:,} lines at {summary['rows_s']:,.0f} rows/s,"
          f" {summary['rows_s'] / summary['bare_parse_rows_s']:.2f}x the bare parser"
          f" ({summary['bare_parse_rows_s']:,.0f}/s, one core)")
    for kind in ("RSS", "PSS"):
        peak, idle = summary[f"peak_{kind.lower()}_mb"], summary[f"idle_{kind.lower()}_mb"]
        print(f"  tree peak {kind} {peak:.0f} MB, {peak / idle:.2f}x the idle tree ({idle:.0f} MB)")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--bare-lines", type=int, default=200_000)
    ap.add_argument("--every", type=float, default=0.05)
    ap.add_argument("--parsers", type=int, default=None)
    ap.add_argument("--memory-limit-mb", type=int, default=None)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of other code (e.g. the commit before), run in turn with"
                         " this tree's on the same file (its server on PYTHONPATH)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    corpus = make_corpus(args.lines, seed=43, header=False, bare_share=0.0)
    text = corpus.text()
    body = text.encode()
    del corpus
    trees: dict[str, Path | None] = {"this tree": None}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    runs: dict[str, list[dict[str, object]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        # ``python -m appliance`` looks in its working directory first: out of this
        # checkout, so that a baseline's PYTHONPATH decides which code its server runs.
        os.chdir(tmp)
        config = config_file(tmp, args.parsers, args.memory_limit_mb)
        for n in range(args.runs):
            order = list(trees.items())
            if n % 2:
                order.reverse()  # each first in every other run
            for label, code in order:
                before = loadavg()
                run = one_run(tmp, f"{n}-{len(runs[label])}-{label.replace(' ', '-')}", body,
                              args.every, config, code)
                run["bare_parse_rows_s"] = bare_parse_rate(text, min(args.bare_lines, args.lines))
                run["load"] = f"{before} -> {loadavg()}"
                runs[label].append(run)
                if not args.json:
                    show(f"run {n + 1}, {label}", run)
    if args.json:
        print(json.dumps(runs))
        return
    summaries = {label: summarise(label, got, args.lines) for label, got in runs.items()}
    if args.baseline is not None:
        ours, base = summaries["this tree"], summaries["baseline"]
        print("this tree / baseline: " + ", ".join(
            f"{name} {ours[key] / base[key]:.2f}x" for name, key in (
                ("rows/s", "rows_s"), ("peak RSS", "peak_rss_mb"), ("peak PSS", "peak_pss_mb"))))


if __name__ == "__main__":
    main()
