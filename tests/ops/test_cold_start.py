"""What a server's start leaves for later (docs/benchmarks.md, "Operations"): the modules
the first ``/healthz`` does not need are not imported by then, and are imported when
their first use comes.

A real ``appliance serve`` runs in a child process through the console script's own
entry (``appliance.cli.main``), with an HTTP provider and a Vonage one configured; a
thread of that process asks ``/healthz`` over a bare socket (no HTTP client of its own
to import) until it answers ``200``, then prints the process's ``sys.modules``. The
test asserts names, never a duration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.harness import ROOT, free_port

PROBE = r"""
import json, os, socket, sys, threading, time

port = int(sys.argv[1])


def healthy():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def report():
    deadline = time.monotonic() + 120
    while not healthy():
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.02)
    print("MODULES " + json.dumps(sorted(sys.modules)), flush=True)
    if len(sys.argv) > 3:  # wait for the test's requests, then list again
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.02)
        print("MODULES " + json.dumps(sorted(sys.modules)), flush=True)
    os._exit(0)


threading.Thread(target=report, daemon=True).start()
from appliance.cli import main

main(["serve", "--port", sys.argv[1], "--data-dir", sys.argv[2]])
"""

CONFIG = """
[providers.gw]
kind = "http"
base_url = "http://127.0.0.1:9"
secret = "s"

[providers.vn]
kind = "vonage"
base_url = "http://127.0.0.1:9"
api_key = "k"
api_secret = "s"
signature_secret = "vonage-signature-secret"
"""

# Deferred to their first use: the HTTP client that sends (aiohttp, with its certificate
# store), phonenumbers (an import's first chunk, an inbound message), the console's
# pages and templates, the API's larger modules, the SMPP protocol (sessions, PDUs,
# smpp34) when no provider speaks SMPP, the report intake's process when no intake port
# is set.
DEFERRED = (
    "aiohttp",
    "jinja2",
    "appliance.web.pages.render",
    "appliance.web.api_campaigns",
    "appliance.web.openapi",
    "smpp34",
    "appliance.smpp.pull",
    "appliance.smpp.transport",
    "appliance.smpp.intake",
    "phonenumbers",
    "appliance.web.intake_process",
)


def loaded_at_start(tmp_path: Path, after: list[str] | None = None) -> list[set[str]]:
    """The modules of a fresh server once ``/healthz`` answers ``200``; with ``after``,
    also once the paths in it were asked for."""
    port = free_port()
    config = tmp_path / "appliance.toml"
    config.write_text(CONFIG)
    done = tmp_path / "asked"
    args = [sys.executable, "-c", PROBE, str(port), str(tmp_path / "data")]
    if after is not None:
        args.append(str(done))
    env = {**os.environ, "APPLIANCE_CONFIG": str(config), "APPLIANCE_LOG_LEVEL": "warning"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=ROOT, text=True)
    try:
        assert proc.stdout is not None
        listings: list[set[str]] = []
        for line in proc.stdout:
            if not line.startswith("MODULES "):
                continue
            listings.append(set(json.loads(line.removeprefix("MODULES "))))
            if after is not None and len(listings) == 1:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
                    for path in after:
                        c.get(path)
                done.write_text("")
        assert proc.wait(60) == 0
        return listings
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_first_healthz_comes_before_what_it_does_not_need(tmp_path: Path) -> None:
    [ready, asked] = loaded_at_start(tmp_path, after=["/sign-in", "/api/openapi.json"])
    # The listing is the serving process's: its server and its probes' routes are there.
    assert {"appliance.server", "appliance.web.api_ops", "appliance.web.callbacks"} <= ready
    assert sorted(set(DEFERRED) & ready) == []
    # A page and the API's description import their modules when first asked for.
    assert {"jinja2", "appliance.web.pages.render", "appliance.web.openapi"} <= asked
