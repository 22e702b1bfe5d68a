"""Real processes for sending tests: the provider simulator and a server pointed at it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from tests.harness import ROOT, appliance_cmd, free_port, wait_for


class SimulatorProcess:
    """``appliance simulator`` in a subprocess on a free port."""

    def __init__(self, tmp: Path, *flags: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.flags = flags
        self.log_path = tmp / f"simulator-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimulatorProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            appliance_cmd("simulator", "--port", str(self.port), *self.flags),
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ))
        log.close()

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited:\n{self.log_path.read_text()}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 30, message="simulator to answer")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(self.url + "/_sim/stats", timeout=30).json()
        return data

    def ref(self, ref: str) -> dict[str, Any]:
        found: dict[str, Any] = self.stats()["refs"].get(ref, {"received": 0, "accepted": 0})
        return found

    def script(self, steps: Iterable[dict[str, Any]]) -> None:
        httpx.post(self.url + "/_sim/script", json=list(steps), timeout=10).raise_for_status()

    def push_now(self, refs: list[str]) -> dict[str, Any]:
        """Push the final receipts of ``refs`` now (those held by ``{"push": false}`` or
        left to status requests), each once taken."""
        r = httpx.post(self.url + "/_sim/push_now", json={"refs": refs}, timeout=30)
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out


def provider_config(path: Path, base_url: str, rate_per_s: float = 200.0, concurrency: int = 8,
                    extra: str = "", sending: str = "") -> Path:
    path.write_text(f"""
[sending]
{sending}

[providers.sim]
kind = "simulator"
base_url = "{base_url}"
rate_per_s = {rate_per_s}
concurrency = {concurrency}
{extra}
""")
    return path


def send(client: httpx.Client, to: str, body: str = "hello", **headers: str) -> str:
    r = client.post("/api/messages", json={"to": to, "body": body}, headers=headers)
    assert r.status_code == 202, r.text
    ref: str = r.json()["ref"]
    return ref


def message(client: httpx.Client, ref: str) -> dict[str, Any]:
    r = client.get(f"/api/messages/{ref}")
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def wait_state(client: httpx.Client, ref: str, *states: str,
               timeout: float = 30) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        m = message(client, ref)
        return m if m["state"] in states else None

    return wait_for(reached, timeout, message=f"{ref} to reach {states}")
