"""The demo's terminal: the banner, then one status line that updates in place.

``appliance demo`` sends its logs to a file in the data dir, so what a newcomer sees
stays readable: the banner (where the data is, the console sign-in, commands to copy,
the curl ones broken between words to fit 80 columns, then the API key, once, on stdout) and
below it a single line, rewritten every second on a terminal, with the import jobs,
the campaign's progress, messages sent per second, the live coverage, how many of the
messages of the provider that never pushes are final (by pulls: it reports nothing
otherwise) and the report inbox. When the output is not a terminal (a pipe, a file) the
line is printed afresh every :data:`PLAIN_EVERY_S` seconds instead.

The figures come from the appliance's own HTTP API (``/api/jobs``, ``/api/campaigns``,
``/api/stats``) with the demo's key: the same numbers the console and scripts see.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

TICK_S = 1.0
PLAIN_EVERY_S = 30.0
RATE_SPAN_S = 5.0
UNSENT = ("QUEUED", "SENDING", "RETRY")
PULLED_FINAL = re.compile(r'^appliance_report_pulls_total\{(?=[^}]*outcome="final")'
                          r'(?=[^}]*provider="([^"]+)")[^}]*\} ([0-9.e+]+)$', re.M)


def pulled_final(metrics: str, provider: str) -> int | None:
    """The provider's messages a pull found final, from ``/metrics``' text (``None``:
    the puller does not ask it)."""
    for found in PULLED_FINAL.finditer(metrics):
        if found.group(1) == provider:
            return int(float(found.group(2)))
    return None


def command_name() -> str:
    """How this process was started, to print commands that can be copied as they are."""
    argv0 = sys.argv[0] if sys.argv else "appliance"
    if argv0.endswith("__main__.py") or argv0 in ("-m", "-c", ""):
        return f"{shlex.quote(sys.executable)} -m appliance"
    return shlex.quote(argv0)


@dataclass(frozen=True)
class BannerFacts:
    data_dir: Path
    log_file: Path
    sim_url: str
    url: str
    key: str
    job_id: int
    password: str | None
    command: str
    smsc: str = ""  # host:port of the SMSC simulator, when the demo runs one
    quiet_url: str = ""  # the simulator that never pushes, when the demo runs one
    quiet_pull_after_s: float = 0.0


BANNER_WIDTH = 79  # a curl line longer than this is cut between words, with a backslash


def shell_lines(words: list[str], indent: str = "  ", width: int = BANNER_WIDTH) -> str:
    """One shell command, broken between its (already quoted) words with ``\\`` so
    that no line is wider than ``width``: a terminal wraps a long line mid-word, and the
    copied command still runs as printed. A word may be an option with its value
    (``-H 'Accept: ...'``): they stay on one line."""
    lines: list[str] = []
    line = indent + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = indent + " " + word
        else:
            line += " " + word
    return "\n".join([*lines, line])


def backup_suggestion(data_dir: Path, cwd: Path | None = None) -> Path:
    """Where the banner's backup command writes: beside the data dir, unless that is the
    current directory (a checkout of the repository: the copy would lie among its
    files), else the system's temporary directory, named after the data dir."""
    here = (cwd or Path.cwd()).resolve()
    parent = data_dir.resolve().parent
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", data_dir.name) or "data"
    if parent != here and here not in parent.parents:
        return parent / f"{name}-backup.db"
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"appliance-{name}-{digest}-backup.db"


def banner(f: BannerFacts) -> str:
    """The demo's banner (stderr). The API key is not in it but on stdout, right after
    its last line (``API key``): on a terminal it shows once, and a script reads it as
    stdout's last line."""
    auth = ["-H " + shlex.quote(f"Authorization: Bearer {f.key}")]
    message = shlex.quote('{"to": "+905321234567", "body": "hello"}')
    data_dir = shlex.quote(str(f.data_dir))
    user = f"   user demo, password {f.password}" if f.password else ""
    backup = shlex.quote(str(backup_suggestion(f.data_dir)))
    smsc = (f"  smsc       {f.smsc}  (SMPP 3.4: the second campaign, provider smsc,\n"
            "             long Turkish text in UCS-2 parts)\n") if f.smsc else ""
    quiet = (f"  quiet      {f.quiet_url}  (never pushes: provider quiet's\n"
             f"             messages are asked about {f.quiet_pull_after_s:g} s after"
             " sending)\n") if f.quiet_url else ""
    tries = "\n".join([
        shell_lines(["curl", "-s", *auth, f"{f.url}/api/jobs/{f.job_id}"]),
        shell_lines(["curl", "-s", *auth, "-H 'Content-Type: application/json'",
                     "-d " + message, f"{f.url}/api/messages"]),
        shell_lines(["curl", "-s", *auth, f"{f.url}/api/stats"]),
        # On one line each, however long: the paths in them cannot be cut anyway.
        f"  {f.command} doctor --data-dir {data_dir}",
        f"  {f.command} backup --data-dir {data_dir} {backup}",
    ])
    return f"""
appliance demo
  data dir   {f.data_dir}
  logs       {f.log_file}
  simulator  {f.sim_url}  (the Vonage format,
             early, repeated and reordered receipts)
{smsc}{quiet}  console    {f.url}/{user}

try:
{tries}
Ctrl+C stops the demo; the data dir stays (doctor and backup work on it after).
  API key"""


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value):.1f}%"


def _num(value: int) -> str:
    return f"{value:,}"


@dataclass
class StatusLine:
    """What the line says, from the API's answers; ``text`` renders it."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    campaigns: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    samples: deque[tuple[float, int]] = field(default_factory=deque)
    pulled: tuple[str, int] = ("", 0)  # a provider that never pushes, messages sent to it
    pulled_final: int | None = None  # its messages a pull found final

    def pulled_text(self) -> str | None:
        """``quiet 97/100 final by pulls``: the provider's messages a status request
        found final (``appliance_report_pulls_total{outcome="final"}``), of those the
        demo sent through it. The provider pushes nothing: pulls are its only reports."""
        name, sent = self.pulled
        if not name or self.pulled_final is None:
            return None
        return f"{name} {_num(self.pulled_final)}/{_num(sent)} final by pulls"

    def sent(self) -> int:
        return sum(sum(n for s, n in c["counts"].items() if s not in UNSENT)
                   for c in self.campaigns)

    def add_sample(self, at: float) -> None:
        self.samples.append((at, self.sent()))
        while self.samples and at - self.samples[0][0] > RATE_SPAN_S:
            self.samples.popleft()

    def per_second(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self.samples[0], self.samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def text(self) -> str:
        parts = [time.strftime("%H:%M:%S")]
        if self.jobs:
            done = sum(1 for j in self.jobs if j["state"] == "DONE")
            running = [j for j in self.jobs if j["state"] in ("DRAFT", "RUNNING")]
            jobs = f"jobs {done}/{len(self.jobs)} done"
            if running:
                jobs += f" (#{running[0]['id']} {running[0]['percent']:.0f}%)"
            parts.append(jobs)
        if self.campaigns:
            c = self.campaigns[0]
            unsent = sum(c["counts"].get(s, 0) for s in UNSENT)
            parts.append(f"sent {_num(c['created'] - unsent)}/{_num(c['total'])}")
            parts.append(f"{self.per_second():.0f} msg/s")
        else:
            parts.append("campaign after the import")
        live = self.stats.get("live")
        if live is not None:
            parts.append(f"coverage {_pct(live['coverage_pct'])} live")
        pulled = self.pulled_text()
        if pulled is not None:
            parts.append(pulled)
        inbox = self.stats.get("inbox")
        if inbox is not None:
            parts.append(f"inbox {_num(int(inbox['waiting']))}")
        return parts[0] + "  " + " · ".join(parts[1:])


class StatusWriter:
    """A thread that keeps the status line current until :meth:`stop`."""

    def __init__(self, url: str, key: str, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 pulled: tuple[str, int] = ("", 0)) -> None:
        self.url = url
        self.key = key
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.clock = clock
        self.status = StatusLine(pulled=pulled)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-status", daemon=True)
        self._written = False

    def start(self) -> StatusWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)
        if self.tty and self._written:
            self.out.write("\n")
            self.out.flush()

    def _columns(self) -> int:
        try:
            columns = os.get_terminal_size(self.out.fileno()).columns
        except (OSError, ValueError):
            columns = shutil.get_terminal_size((120, 24)).columns
        return columns if columns >= 40 else 120  # a pty that reports no size

    def _read(self, client: httpx.Client) -> bool:
        try:
            self.status.jobs = client.get("/api/jobs").json()["jobs"]
            self.status.campaigns = client.get("/api/campaigns").json()["campaigns"]
            self.status.stats = client.get("/api/stats").json()
            if self.status.pulled[0]:
                self.status.pulled_final = pulled_final(client.get("/metrics").text,
                                                        self.status.pulled[0])
        except (httpx.HTTPError, ValueError, KeyError):
            return False  # not up yet, or stopping
        self.status.add_sample(self.clock())
        return True

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        last_plain = 0.0
        with httpx.Client(base_url=self.url, headers=headers, timeout=5) as client:
            while not self._stop.wait(TICK_S):
                if not self._read(client) or self._stop.is_set():
                    continue
                line = self.status.text()
                if self.tty:  # one line, cut to the terminal's width so it never wraps
                    width = self._columns() - 1
                    self.out.write("\r" + line[:width] + "\x1b[K")
                elif self.clock() - last_plain >= PLAIN_EVERY_S:
                    self.out.write(line + "\n")
                    last_plain = self.clock()
                else:
                    continue
                self.out.flush()
                self._written = True
