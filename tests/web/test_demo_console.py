"""``appliance demo`` as a newcomer meets it: in a terminal (a real pty), then in a browser.

One demo serves the module, started the way ``make demo`` starts it, in a terminal:
the banner must stay on screen (logs go to a file, one status line updates in place),
the live panel of the dashboard must show coverage within a minute, the commands the
banner prints must work as printed, and Ctrl+C must end it within 3 s, cleanly, while
its campaign is still sending. The tests run in this order; the last one stops it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shlex
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import ROOT, appliance_cmd, child_env, free_port, wait_for

CHROMIUM = Path("/usr/bin/chromium")
UPDATE_SHOTS = os.environ.get("APPLIANCE_UPDATE_SCREENSHOTS") == "1"
CONTACTS = 20_000  # about 100 s of sending at the demo's rate: still sending at the end
pytestmark = pytest.mark.slow


class TerminalDemo:
    """``appliance demo`` with a pty (80x40) as its terminal; everything it prints is kept."""

    def __init__(self, cwd: Path, port: int) -> None:
        self.cwd = cwd
        self.data_dir = cwd / "demo-data"
        self.port = port
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            appliance_cmd("demo", "--data-dir", str(self.data_dir), "--port", str(port),
                          "--contacts", str(CONTACTS)),
            stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
        os.close(slave)
        self.master = master
        self._out = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._out += chunk

    def output(self) -> str:
        with self._lock:
            return self._out.decode("utf-8", errors="replace")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def banner_value(self, pattern: str) -> str:
        found = wait_for(lambda: re.search(pattern, self.output()), 60,
                         message=f"{pattern!r} in the banner")
        return found.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        os.close(self.master)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TerminalDemo]:
    running = TerminalDemo(tmp_path_factory.mktemp("demo"), free_port())
    try:
        running.banner_value(r"API key\s+(apl_\S+)")
        yield running
    finally:
        running.stop()


def campaign(demo: TerminalDemo, key: str) -> dict[str, Any] | None:
    """The demo's campaign through the HTTP simulator (the other goes over SMPP)."""
    try:
        found = httpx.get(demo.url + "/api/campaigns", timeout=5,
                          headers={"Authorization": f"Bearer {key}"}).json()["campaigns"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return next((dict(c) for c in found if c["provider"] == "sim"), None)


def test_the_terminal_keeps_the_banner_and_one_status_line(demo: TerminalDemo) -> None:
    key = demo.banner_value(r"API key\s+(apl_\S+)")
    wait_for(lambda: (lambda c: c and c["finalised"] > 100)(campaign(demo, key)), 60,
             interval=0.5, message="the campaign to get reports")
    wait_for(lambda: demo.output().count("msg/s") >= 3, 30, message="the status line")
    out = demo.output()
    banner, _, after = out.rpartition("\n" + key + "\r\n")  # the key: the last line
    assert "data dir" in banner and str(demo.data_dir) in banner
    assert f"doctor --data-dir {demo.data_dir}" in banner
    # Thousands of log lines went to the file; the terminal got one line, rewritten.
    assert after.count("\n") <= 3, after[-2000:]
    assert '{"ts"' not in after and "unknown report" not in after
    assert "\r" in after and "sent " in after and "coverage" in after
    log = (demo.data_dir / "appliance.log").read_text()
    assert f"logs       {demo.data_dir / 'appliance.log'}" in banner
    assert log.count("\n") > 5 and '"unknown report"' in log


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_the_live_dashboard_shows_coverage_within_a_minute(
        demo: TerminalDemo, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.web.test_console_browser import CHROMIUM_ARGS

    password = demo.banner_value(r"user demo, password (\S+)")
    shots = ROOT / "docs" / "screenshots" if UPDATE_SHOTS else tmp_path
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
            page.goto(demo.url + "/dashboard")
            page.fill("#username", "demo")
            page.fill("#password", password)
            page.click("form[action='/login'] button[type=submit]")
            page.wait_for_url(demo.url + "/dashboard")
            left_ms = max(1.0, 60 - (time.monotonic() - demo.started)) * 1000
            # The settled window is empty in a fresh demo; the live panel is not, and it
            # updates in place (no reload) as reports arrive.
            page.wait_for_function(
                "() => { const t = document.querySelector('[data-live-coverage]').textContent;"
                " return parseFloat(t) > 0; }", timeout=left_ms)
            first = page.inner_text("[data-live-coverage]")
            page.wait_for_function(
                "(before) => document.querySelector('[data-live-coverage]').textContent"
                " !== before", arg=first, timeout=20_000)
            assert page.inner_text("[data-coverage]") == "–"  # nothing settled yet
            assert page.locator("svg.chart rect.settling").count() == 1
            assert page.eval_on_selector_all(
                "svg.chart rect.total", "rs => rs.some(r => parseFloat(r.getAttribute("
                "'height')) > 0)")
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / "dashboard.png"))
            page.set_viewport_size({"width": 390, "height": 800})
            page.reload()
            scroll = page.eval_on_selector(".chart-scroll",
                                           "e => [e.scrollWidth, e.clientWidth, e.scrollLeft]")
            assert scroll[0] > scroll[1] and scroll[2] > 0  # readable, scrolled to now
        finally:
            browser.close()
    assert time.monotonic() - demo.started < 120


def test_the_banners_doctor_and_backup_commands_work_as_printed(demo: TerminalDemo) -> None:
    out = demo.output()
    commands = {m.group(1): shlex.split(m.group(0)) for m in re.finditer(
        r"^\s*\S+ (?:-m appliance )?(doctor|backup) --data-dir .*$", out.replace("\r", ""),
        re.M)}
    assert set(commands) == {"doctor", "backup"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    doctor = subprocess.run(commands["doctor"], cwd=demo.cwd, capture_output=True, text=True,
                            timeout=60, env=env)
    assert doctor.returncode in (0, 1), doctor.stderr
    live = re.search(r"^ coverage  ([\d.]+)%", doctor.stdout, re.M)
    assert live and float(live.group(1)) > 0, doctor.stdout
    backup = subprocess.run(commands["backup"], cwd=demo.cwd, capture_output=True, text=True,
                            timeout=120, env=env)
    assert backup.returncode == 0, backup.stderr
    assert Path(backup.stdout.strip().splitlines()[-1]).is_file()


def test_the_provider_that_never_pushes_has_every_message_final_by_pulls(
        demo: TerminalDemo) -> None:
    from appliance.demo import QUIET_MESSAGES, QUIET_PROVIDER, quiet_numbers

    key = demo.banner_value(r"API key\s+(apl_\S+)")
    assert re.search(r"quiet\s+http://127\.0\.0\.1:\d+\s+\(never pushes", demo.output())
    headers = {"Authorization": f"Bearer {key}"}
    reported = {"DELIVERED", "FAILED", "EXPIRED"}

    def final(number: str) -> dict[str, Any] | None:
        try:
            found = httpx.get(demo.url + "/api/messages", params={"msisdn": number},
                              headers=headers, timeout=5).json()["messages"]
        except (httpx.HTTPError, ValueError, KeyError):
            return None
        return found[0] if found and found[0]["state"] in reported else None

    # Asked 10 s after sending, 100 refs a request: final within the demo's first
    # minute and a half, however long the tests before took.
    left = max(5.0, 90 - (time.monotonic() - demo.started))
    last = wait_for(lambda: final(quiet_numbers()[-1]), left, interval=0.5,
                    message="the last quiet message final")
    wait_for(lambda: f"quiet {QUIET_MESSAGES}/{QUIET_MESSAGES} final by pulls"
             in demo.output(), 30, message="every quiet message final, on the status line")
    for number in (quiet_numbers()[0], quiet_numbers()[QUIET_MESSAGES // 2]):
        first = final(number)
        assert first is not None and first["provider"] == QUIET_PROVIDER
    message = httpx.get(f"{demo.url}/api/messages/{last['ref']}", headers=headers,
                        timeout=5).json()
    sources = {entry["source"] for entry in message["history"]}
    assert message["pulls"] >= 1 and sources == {"pull"}, message


@pytest.mark.serial  # times itself: run alone (Makefile)
def test_ctrl_c_stops_the_demo_within_3_s_while_it_sends_without_a_traceback(
        demo: TerminalDemo) -> None:
    key = demo.banner_value(r"API key\s+(apl_\S+)")
    # Sending: its messages created and some still queued (not finished before the test).
    state = wait_for(lambda: (c := campaign(demo, key)) and c["counts"].get("QUEUED", 0) > 0
                     and c, 10, message="the campaign sending")
    assert state["counts"].get("QUEUED", 0) > 0, "the campaign finished before the test"
    before = len(demo.output())
    started = time.monotonic()
    demo.proc.send_signal(signal.SIGINT)  # what Ctrl+C sends
    code = demo.proc.wait(10)
    took = time.monotonic() - started
    wait_for(lambda: "stopped;" in demo.output()[before:], 5, message="the last line")
    after = demo.output()[before:]
    assert code == 0 and took < 3.0, (code, took, after)
    assert "Traceback" not in after and "Error" not in after
    log = (demo.data_dir / "appliance.log").read_text()
    assert "stopped cleanly" in log
    assert "Traceback" not in log and "CancelledError" not in log


def test_a_busy_port_fails_before_any_banner(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        out = subprocess.run(appliance_cmd("demo", "--port", str(port), "--data-dir",
                                           str(tmp_path / "d")),
                             capture_output=True, text=True, timeout=60, env=child_env())
    assert out.returncode == 1 and time.monotonic() - started < 10
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "API key" not in out.stderr and out.stdout == "" and "password" not in out.stderr
