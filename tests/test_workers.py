"""How ``make test`` shares the suite between its workers (``tests/workers.py``): a module
whose tests share a module-scoped fixture runs on one worker (the fixture is set up
once), the other tests go where a worker is free, the slow ones start first, and a
failure is printed and fails the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT

CONFTEST = """
import pytest
from tests import workers

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    workers.plan(config, items)
"""

SHARED = """
import json, os, pytest

SETUPS = []

@pytest.fixture(scope="module")
def server():
    SETUPS.append(1)
    return object()

@pytest.mark.parametrize("n", range(6))
def test_shares(server, n):
    with open(os.environ["RECORD"], "a") as out:
        out.write(json.dumps({"test": "shares", "worker": os.environ["PYTEST_XDIST_WORKER"],
                              "setups": len(SETUPS)}) + "\\n")
"""

LOOSE = """
import json, os, pytest

@pytest.mark.parametrize("n", range(6))
def test_loose(n):
    with open(os.environ["RECORD"], "a") as out:
        out.write(json.dumps({"test": "loose", "worker": os.environ["PYTEST_XDIST_WORKER"]})
                  + "\\n")

@pytest.mark.slow
def test_slow():
    with open(os.environ["RECORD"], "a") as out:
        out.write(json.dumps({"test": "slow", "worker": os.environ["PYTEST_XDIST_WORKER"]})
                  + "\\n")
"""


def test_a_module_sharing_a_fixture_stays_on_one_worker_slow_tests_go_first_and_a_failure_fails(
        tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_shared.py").write_text(SHARED)
    (suite / "test_loose.py").write_text(LOOSE)
    (suite / "test_fails.py").write_text("def test_broken():\n    assert 1 + 1 == 3\n")
    record = tmp_path / "record.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "--no-loadscope-reorder", "-o", "markers=slow",
         "--rootdir", str(suite), str(suite)],
        cwd=suite, capture_output=True, text=True, timeout=120,
        env={**_env(), "RECORD": str(record), "PYTHONPATH": str(ROOT)})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_fails.py::test_broken" in run.stdout
    assert "assert (1 + 1) == 3" in run.stdout
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    shared = [r for r in rows if r["test"] == "shares"]
    assert len(shared) == 6 and len({r["worker"] for r in shared}) == 1
    assert {r["setups"] for r in shared} == {1}  # the module fixture, set up once
    assert len([r for r in rows if r["test"] == "loose"]) == 6
    slow = next(r for r in rows if r["test"] == "slow")
    assert next(r for r in rows if r["worker"] == slow["worker"]) == slow  # its worker's first


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
