"""A start that fails (here: the port is taken) leaves no empty data dir and no lock
file behind; what was there before stays."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import appliance_cmd, child_env, create_account


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def start(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(appliance_cmd(*args), capture_output=True, text=True, timeout=60,
                          env=child_env())
    assert done.returncode == 1 and "cannot listen on" in done.stderr, done.stderr
    return done


def test_a_failed_start_leaves_no_empty_dir_and_no_lock_file(
        tmp_path: Path, busy_port: int) -> None:
    port = str(busy_port)
    fresh = tmp_path / "fresh"
    start("serve", "--data-dir", str(fresh), "--port", port)
    assert not fresh.exists()
    demo_dir = tmp_path / "demo"
    start("demo", "--data-dir", str(demo_dir), "--port", port)
    assert not demo_dir.exists()

    # A data dir in use before: its database stays; the lock file it lacked is not left.
    used = tmp_path / "used"
    create_account(used)
    (used / "appliance.lock").unlink(missing_ok=True)
    before = sorted(p.name for p in used.iterdir())
    start("serve", "--data-dir", str(used), "--port", port)
    assert sorted(p.name for p in used.iterdir()) == before
