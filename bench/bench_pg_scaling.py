"""SCALE-2: durable report intake with 1, 2, 4, ... ``appliance serve`` processes on one
PostgreSQL, beside one process on SQLite in the same run.

What it does, in order:

1. starts a throwaway PostgreSQL with ``fsync = on`` (:class:`bench.bench_postgresql.
   DurablePgServer`, the tests' server helper with the durability the figures need);
2. a SQLite baseline: one ``appliance serve`` on its own SQLite file;
3. for each N of ``--processes``: a fresh database, filled the way an operator fills one
   (``appliance account create`` on a SQLite data dir, then ``appliance migrate --to``),
   and N ``appliance serve`` processes, each with its own data dir, its own ``[reports]
   intake_port`` and the same ``database_url``, each with a ``vonage`` provider whose
   ``signature_secret`` signs the receipts;
4. one ``wrk`` per process against that process's intake port, all at once, for
   ``--seconds``, POSTing signed Vonage delivery receipts (JSON), each for its own
   ``client-ref`` (the "unknown report": stored raw, filed in the inbox as
   ``WAITING``), so every request is a write;
5. afterwards it counts the ``raw_reports`` rows and checks that every ``2xx`` was
   stored (rows >= 2xx answers).

It prints, per set-up: ``2xx`` answers a second (each a durable report: the intake
answers ``2xx`` only after the commit, ``synchronous = "FULL"``), the ratio to one
PostgreSQL process and to SQLite, the CPU each appliance process used (its process
tree: the server and its intake child) and PostgreSQL's (the postmaster's tree), in
cores (CPU seconds per wall second, from ``/proc/<pid>/stat``), and what PostgreSQL's
backends waited on: ``pg_stat_activity`` and the ungranted ``pg_locks`` sampled
``--sample-hz`` times a second, as the mean number of backends waiting on a
heavyweight lock (``wait_event_type = 'Lock'``) with the kinds (``advisory``,
``transactionid``, ``tuple``, ...; an advisory key that spells ASCII is shown by
name, e.g. ``counts`` for :data:`appliance.store.count_triggers.COUNTS_LOCK`), and the
commonest other wait events (``IO:WALSync`` is a commit waiting for its flush).

With ``--without-counts-lock``, each set-up again with the count triggers' global
advisory lock taken out of ``row_counts_move`` in that database (a what-if for the
redesign, never the product: see :func:`drop_counts_lock`), so the samples show what all
processes meet next.

All traffic goes to 127.0.0.1; each run is bounded by ``--seconds``; every process this
starts (the servers, their intake children, ``wrk``, PostgreSQL) is stopped on the way
out, also on Ctrl+C or an error.

Run: ``.venv/bin/python bench/bench_pg_scaling.py [--processes 1,2,4] [--seconds 10]
[--without-counts-lock]``
(needs Debian's ``wrk`` and ``postgresql`` packages).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.providers.vonage import vonage_signature  # noqa: E402
from bench.bench_postgresql import DurablePgServer  # noqa: E402
from tests.harness import Server, free_port, run_cli, wait_for  # noqa: E402
from tests.pg_server import PgServer  # noqa: E402

PROVIDER = "vg"
API_KEY = "benchkey"
SECRET = "bench-signature-secret"
METHOD = "sha256"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# wrk sends the lines of a file in turn, one body a request (each its own client-ref).
LUA = """
local bodies, n, i = {}, 0, 0
for line in io.lines("%(file)s") do
  n = n + 1
  bodies[n] = line
end
request = function()
  i = i + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"},
                    bodies[((i - 1) %% n) + 1])
end
"""


# -- load ------------------------------------------------------------------------------

def signed_receipt(ref: str, stamp: int) -> str:
    """A Vonage delivery receipt for ``ref`` as a JSON body, signed with ``SECRET`` as
    Vonage signs its webhooks (``sig`` over the other fields, HMAC-SHA256)."""
    params = {
        "msisdn": "447700900000", "to": "AcmeInc", "network-code": "23410",
        "messageId": f"M{ref}", "client-ref": ref, "status": "delivered",
        "scts": "2601010000", "err-code": "0", "price": "0.03330000",
        "message-timestamp": "2026-01-01 00:00:00", "timestamp": str(stamp),
        "nonce": f"n{ref}",
    }
    params["sig"] = vonage_signature(params, SECRET, METHOD)
    return json.dumps(params)


def write_bodies(path: Path, count: int, prefix: str) -> None:
    """``count`` signed receipts, one a line, each for its own ref."""
    stamp = int(time.time())
    with path.open("w") as fh:
        for i in range(count):
            fh.write(signed_receipt(f"{prefix}{i:08d}", stamp) + "\n")


@dataclass
class WrkResult:
    """What one ``wrk`` said: requests, ``2xx`` among them, and its own duration."""

    requests: int
    non2xx: int
    seconds: float
    socket_errors: int

    @property
    def ok(self) -> int:
        return self.requests - self.non2xx


def parse_wrk(text: str) -> WrkResult:
    """The figures of ``wrk``'s summary (its ``--latency`` text)."""
    total = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text)
    if total is None:
        raise RuntimeError(f"wrk said nothing readable:\n{text}")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0}[total.group(3)]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       text)
    return WrkResult(
        requests=int(total.group(1)), non2xx=int(bad.group(1)) if bad else 0,
        seconds=float(total.group(2)) * scale,
        socket_errors=sum(int(g) for g in errors.groups()) if errors else 0)


# -- CPU from /proc --------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), or None when it
    is gone. Fields after the ``comm`` in parentheses: ppid is the 2nd, utime, stime,
    cutime, cstime the 12th to 15th (proc(5))."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    ticks = sum(int(f) for f in fields[11:15])
    return int(fields[1]), ticks / CLOCK_TICKS


def tree_cpu_s(root: int) -> float:
    """CPU seconds used so far by ``root`` and every live descendant (a child that has
    exited counts in its parent's ``cutime``/``cstime``)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            got = _stat(int(entry))
            if got is not None:
                parents[int(entry)], cpu[int(entry)] = got
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += [p for p, parent in parents.items() if parent == pid]
    return total


def postmaster_pid(pg: PgServer) -> int:
    """The PostgreSQL server's main process (``postmaster.pid``'s first line)."""
    return int((pg.root / "data" / "postmaster.pid").read_text().split()[0])


# -- PostgreSQL's waits ----------------------------------------------------------------

def advisory_name(classid: int, objid: int) -> str:
    """An advisory lock's bigint key (``classid`` high, ``objid`` low 32 bits), by name
    when its bytes spell ASCII (the store's keys do: ``counts``, ``triggers``), else hex."""
    key = (classid << 32) | objid
    raw = key.to_bytes(8, "big").lstrip(b"\0")
    if raw and all(32 < b < 127 for b in raw):
        return raw.decode()
    return f"{key:#x}"


@dataclass
class Waits:
    """Samples of what the database's backends were doing."""

    samples: int = 0
    lock_waiters: int = 0  # summed over samples: backends with wait_event_type = 'Lock'
    busy: int = 0  # summed: backends in a transaction (active or idle in transaction)
    lock_kinds: Counter[str] = field(default_factory=Counter)  # Lock:<wait_event>
    other_waits: Counter[str] = field(default_factory=Counter)
    ungranted: Counter[str] = field(default_factory=Counter)  # pg_locks, by type and key

    def mean(self, n: int) -> float:
        return n / self.samples if self.samples else 0.0


class WaitSampler(threading.Thread):
    """Samples ``pg_stat_activity`` and ungranted ``pg_locks`` of one database ``hz``
    times a second, on a connection of its own, until :meth:`stop`."""

    ACTIVITY = ("SELECT state, wait_event_type, wait_event FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()"
                " AND state IN ('active', 'idle in transaction')")
    # By the waiting backend's database: a transactionid lock names none of its own.
    LOCKS = ("SELECT l.locktype, l.mode, l.classid, l.objid, l.relation::regclass::text"
             " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
             " WHERE NOT l.granted AND a.datname = %s")

    def __init__(self, url: str, database: str, hz: float) -> None:
        super().__init__(daemon=True)
        self.url, self.database, self.interval = url, database, 1.0 / hz
        self.waits = Waits()
        self._done = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._done.wait(self.interval):
                self.sample(conn)

    def sample(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        w = self.waits
        activity = conn.execute(self.ACTIVITY, (self.database,)).fetchall()
        locks = conn.execute(self.LOCKS, (self.database,)).fetchall()
        w.samples += 1
        w.busy += len(activity)
        for state, kind, event in activity:
            if kind == "Lock":
                w.lock_waiters += 1
                w.lock_kinds[f"Lock:{event}"] += 1
            elif kind is not None:
                w.other_waits[f"{kind}:{event}"] += 1
            elif state == "active":
                w.other_waits["on CPU"] += 1
        for locktype, mode, classid, objid, relation in locks:
            what = str(locktype)
            if locktype == "advisory" and isinstance(classid, int) and isinstance(objid, int):
                what += f" {advisory_name(classid, objid)}"
            elif relation is not None:
                what += f" on {relation}"
            w.ungranted[f"{what} ({mode})"] += 1

    def stop(self) -> Waits:
        self._done.set()
        self.join(10)
        return self.waits


# -- set-ups ---------------------------------------------------------------------------

@dataclass
class Outcome:
    """One set-up's figures."""

    label: str
    processes: int
    ok: int
    non2xx: int
    socket_errors: int
    seconds: float
    stored: int
    appliance_cpu: list[float]  # cores, per process tree
    pg_cpu: float | None  # cores
    wrk_cpu: float  # cores, all wrk together
    waits: Waits | None
    commits: int | None = None  # the database's commits meanwhile (the sampler's excluded)
    wal_bytes: int | None = None  # WAL written meanwhile (the whole server's)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0


def config_text(intake_port: int, database_url: str) -> str:
    """An appliance config: the database, a signed Vonage provider, the intake port."""
    top = f'database_url = "{database_url}"\n' if database_url else ""
    return (f"{top}[providers.{PROVIDER}]\nkind = \"vonage\"\n"
            f"base_url = \"http://127.0.0.1:9\"\napi_key = \"{API_KEY}\"\n"
            f"api_secret = \"unused\"\nsignature_secret = \"{SECRET}\"\n"
            f"signature_method = \"{METHOD}\"\n\n[reports]\nintake_port = {intake_port}\n")


@dataclass
class Fleet:
    """The appliance processes of one set-up, and the ``wrk`` runs against them."""

    servers: list[Server] = field(default_factory=list)
    intake_urls: list[str] = field(default_factory=list)
    wrks: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, tmp: Path, n: int, database_url: str) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            data = tmp / f"p{i}" / "data"
            data.mkdir(parents=True)
            port = free_port()
            cfg = tmp / f"p{i}.toml"
            cfg.write_text(config_text(port, database_url))
            server = Server(data, config=cfg)
            self.servers.append(server)
            server.start()
            self.intake_urls.append(f"http://127.0.0.1:{port}/callbacks/{PROVIDER}")
        for url in self.intake_urls:  # unsigned: refused, so the intake child is up
            wait_for(functools.partial(_answers, url, 401), 60, message=f"the intake at {url}")

    def stop(self) -> None:
        for proc in self.wrks:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for server in self.servers:
            server.stop()


def _answers(url: str, status: int) -> bool:
    try:
        return httpx.post(url, content=b"{}", timeout=2).status_code == status
    except httpx.HTTPError:
        return False


def run_load(fleet: Fleet, tmp: Path, label: str, args: argparse.Namespace,
             pg: PgServer | None, database: str | None) -> Outcome:
    """``wrk`` against every intake at once for ``args.seconds``; CPU and waits meanwhile."""
    scripts = []
    bodies = max(20_000, args.seconds * args.bodies_per_second)
    for i in range(len(fleet.servers)):
        body_file = tmp / f"bodies-{i}.txt"
        write_bodies(body_file, bodies, f"{label[:2].upper()}{i}x")
        script = tmp / f"post-{i}.lua"
        script.write_text(LUA % {"file": body_file})
        scripts.append(script)
    sampler = None
    if pg is not None and database is not None:
        # Connected to the database itself, so the relations' names resolve.
        sampler = WaitSampler(pg.url_for(database), database, args.sample_hz)
        sampler.start()
    roots = [s.proc.pid for s in fleet.servers if s.proc is not None]
    pg_root = postmaster_pid(pg) if pg is not None else None
    before = [tree_cpu_s(r) for r in roots]
    pg_before = tree_cpu_s(pg_root) if pg_root else 0.0
    own_before = _children_cpu_s()
    started = time.monotonic()
    for url, script in zip(fleet.intake_urls, scripts, strict=True):
        fleet.wrks.append(subprocess.Popen(
            ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.seconds}s",
             "--timeout", "10s", "-s", str(script), url],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = [parse_wrk(p.communicate(timeout=args.seconds + 60)[0]) for p in fleet.wrks]
    wall = time.monotonic() - started
    after = [tree_cpu_s(r) for r in roots]
    pg_after = tree_cpu_s(pg_root) if pg_root else 0.0
    waits = sampler.stop() if sampler is not None else None
    fleet.wrks.clear()
    return Outcome(
        label=label, processes=len(fleet.servers), ok=sum(r.ok for r in results),
        non2xx=sum(r.non2xx for r in results),
        socket_errors=sum(r.socket_errors for r in results),
        seconds=max(r.seconds for r in results), stored=0,
        appliance_cpu=[(a - b) / wall for a, b in zip(after, before, strict=True)],
        pg_cpu=(pg_after - pg_before) / wall if pg_root else None,
        wrk_cpu=(_children_cpu_s() - own_before) / wall, waits=waits)


def _children_cpu_s() -> float:
    """CPU seconds of this process's reaped children (the ``wrk`` runs, once waited)."""
    usage = os.times()
    return usage.children_user + usage.children_system


def stored_sqlite(data_dir: Path) -> int:
    conn = sqlite3.connect(f"file:{data_dir / 'appliance.db'}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM raw_reports").fetchone()[0])
    finally:
        conn.close()


def database_totals(url: str) -> tuple[int, int]:
    """(commits so far in this database, the server's WAL position in bytes). Backends
    report their counters when idle or on exit, so read these with the servers stopped."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
            " FROM pg_stat_database WHERE datname = current_database()").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def drop_counts_lock(url: str) -> bool:
    """A what-if for the redesign, never the product: the count function without its
    first statement, the global advisory lock (``COUNTS_LOCK``), so the next meeting
    point (the popular count rows themselves) shows in the lock samples. Safe here only
    because every unit of this load moves its count keys in one order (``parsed``, then
    ``WAITING``): other loads may deadlock without the lock. False when the installed
    function has no such lock (nothing to take away)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_get_functiondef('row_counts_move'::regproc)").fetchone()
        if row is None:
            return False
        text = str(row[0])
        lockless = re.sub(r"PERFORM pg_advisory_xact_lock\([^)]*\);", "", text)
        if lockless == text:
            return False
        conn.execute(lockless)  # CREATE OR REPLACE, as pg_get_functiondef writes it
        return True


def stored_pg(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM raw_reports").fetchone()
        return int(row[0]) if row else 0


def sqlite_setup(tmp: Path, args: argparse.Namespace) -> Outcome:
    fleet = Fleet()
    try:
        fleet.start(tmp, 1, "")
        outcome = run_load(fleet, tmp, "sqlite", args, None, None)
    finally:
        fleet.stop()
    outcome.stored = stored_sqlite(fleet.servers[0].data_dir)
    return outcome


def pg_setup(tmp: Path, n: int, pg: PgServer, args: argparse.Namespace,
             lockless: bool = False) -> Outcome:
    database = f"scale{n}{'x' if lockless else ''}_{os.getpid()}"
    url = pg.create_database(database)
    seed = tmp / "seed"
    seed.mkdir(parents=True)
    run_cli("account", "create", "bench", "--data-dir", str(seed))
    run_cli("migrate", "--data-dir", str(seed), "--to", url)
    fleet = Fleet()
    try:
        fleet.start(tmp, n, url)  # the servers install the triggers as they start
        label = f"pg{n}"
        if lockless:
            label += " without COUNTS_LOCK" if drop_counts_lock(url) else " (no COUNTS_LOCK)"
        commits, wal = database_totals(url)
        outcome = run_load(fleet, tmp, label, args, pg, database)
    finally:
        fleet.stop()
    outcome.stored = stored_pg(url)
    commits_after, wal_after = database_totals(url)
    sampled = outcome.waits.samples * 2 if outcome.waits else 0  # autocommit SELECTs
    outcome.commits = commits_after - commits - sampled - 2
    outcome.wal_bytes = wal_after - wal
    pg.drop_database(database)
    return outcome


# -- report ----------------------------------------------------------------------------

def describe(o: Outcome, sqlite: Outcome | None, one: Outcome | None) -> list[str]:
    ratios = []
    if one is not None and o is not one:
        ratios.append(f"{o.rate / one.rate:.2f}x one PostgreSQL process" if one.rate else "")
    if sqlite is not None and o is not sqlite:
        ratios.append(f"{o.rate / sqlite.rate:.2f}x SQLite" if sqlite.rate else "")
    cpu = " + ".join(f"{c:.2f}" for c in o.appliance_cpu)
    lines = [
        f"{o.label}: {o.processes} process{'es' if o.processes > 1 else ''}:"
        f" {o.rate:,.0f} durable reports/s ({o.ok:,} 2xx in {o.seconds:.1f} s)"
        + (f"   {'; '.join(r for r in ratios if r)}" if ratios else ""),
        f"    CPU (cores): appliance {cpu}"
        + (f"; PostgreSQL {o.pg_cpu:.2f}" if o.pg_cpu is not None else "")
        + f"; wrk {o.wrk_cpu:.2f}",
        f"    stored raw reports {o.stored:,} >= 2xx {o.ok:,}:"
        f" {'OK' if o.stored >= o.ok else 'LOST REPORTS'}"
        f"   (non-2xx {o.non2xx:,}, socket errors {o.socket_errors:,})",
    ]
    if o.commits and o.wal_bytes is not None:
        lines.append(f"    commits {o.commits:,} ({o.stored / o.commits:.1f} reports a commit),"
                     f" WAL {o.wal_bytes / max(o.stored, 1):,.0f} bytes a report")
    w = o.waits
    if w is not None:
        kinds = ", ".join(f"{k} {w.mean(v):.2f}" for k, v in w.lock_kinds.most_common(4))
        other = ", ".join(f"{k} {w.mean(v):.2f}" for k, v in w.other_waits.most_common(5))
        ungranted = ", ".join(f"{k} {w.mean(v):.2f}" for k, v in w.ungranted.most_common(4))
        lines += [
            f"    PostgreSQL, mean of {w.samples} samples: {w.mean(w.busy):.2f} backends in a"
            f" transaction, {w.mean(w.lock_waiters):.2f} waiting on a lock"
            + (f" ({kinds})" if kinds else ""),
            f"    ungranted pg_locks: {ungranted or 'none'}",
            f"    other waits: {other or 'none'}",
        ]
    return lines


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def stopped_on_signals() -> Iterator[None]:
    """SIGINT (also when the shell started us with it ignored), SIGTERM and SIGHUP unwind
    the stack, so every ``finally`` stops what it started."""
    old = {s: signal.signal(s, _interrupted)
           for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--processes", default="1,2,4",
                    help="the numbers of appliance processes to measure, comma-separated")
    ap.add_argument("--seconds", type=int, default=10, help="each wrk run's duration")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections per process")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads per process")
    ap.add_argument("--sample-hz", type=float, default=4.0,
                    help="samples of pg_stat_activity and pg_locks a second")
    ap.add_argument("--bodies-per-second", type=int, default=6000,
                    help="distinct receipts written per process per second of the run")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the SQLite baseline")
    ap.add_argument("--without-counts-lock", action="store_true",
                    help="also each set-up with the count triggers' global advisory lock"
                         " taken out (a what-if: shows the next meeting point)")
    args = ap.parse_args()
    counts = [int(p) for p in args.processes.split(",") if p.strip()]
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")
    # Each set-up's database is named in its servers' config: no APPLIANCE_DATABASE_URL
    # from the caller's shell may override it (the SQLite baseline would not be SQLite).
    os.environ.pop("APPLIANCE_DATABASE_URL", None)
    with stopped_on_signals(), tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_s:
        tmp = Path(tmp_s)
        pg = DurablePgServer.start()
        try:
            print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f};"
                  f" wrk -t{args.threads} -c{args.connections} -d{args.seconds}s per process;"
                  " PostgreSQL fsync on, synchronous_commit on", flush=True)
            sqlite = None
            if not args.no_sqlite:
                sqlite = sqlite_setup(tmp / "sqlite", args)
                print("\n".join(describe(sqlite, None, None)), flush=True)
            one: Outcome | None = None
            outcomes = []
            for n in counts:
                o = pg_setup(tmp / f"pg{n}", n, pg, args)
                outcomes.append(o)
                one = one or (o if n == 1 else None)
                print("\n".join(describe(o, sqlite, one)), flush=True)
                if args.without_counts_lock:
                    x = pg_setup(tmp / f"pg{n}x", n, pg, args, lockless=True)
                    outcomes.append(x)
                    print("\n".join(describe(x, sqlite, one)), flush=True)
            print(f"load average {os.getloadavg()[0]:.1f}")
            lost = [o.label for o in [*outcomes, *([sqlite] if sqlite else [])]
                    if o.stored < o.ok]
        finally:
            pg.stop()
    return 1 if lost else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as stop:
        sys.exit(f"stopped ({stop or 'Ctrl+C'}): every process this started is stopped")
