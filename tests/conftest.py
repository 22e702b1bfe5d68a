"""Shared fixtures: a data dir, a running server, an account's key, and ``backend``.

``backend`` runs a test on both stores: ``sqlite`` (the data dir's file) and
``postgresql`` (a fresh schema of the session's throwaway PostgreSQL server, given to
every ``appliance`` process the test starts as ``APPLIANCE_DATABASE_URL``). Request it
first (``@pytest.mark.usefixtures("backend")`` or as the first argument), so the
servers and commands the test starts see it.
"""

from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import settings

from appliance.store import Store
from tests import binary_build, workers
from tests.harness import ROOT, Server, create_account
from tests.pg_server import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]
BACKENDS = ("sqlite", "postgresql")

# ``.ci/run`` sets HYPOTHESIS_PROFILE=ci: a clean machine runs the same examples every
# time, so what it finds can be run again anywhere. Other runs explore new examples.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _in_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (``pytest -n``)."""
    return hasattr(config, "workerinput")


def _distributing(config: pytest.Config) -> bool:
    """Whether this process is the controller of pytest-xdist workers."""
    return getattr(config.option, "dist", "no") != "no" and not _in_worker(config)


def pytest_configure(config: pytest.Config) -> None:
    if _distributing(config):
        binary_build.share_with_workers()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the appliance's modules once, so the hundreds of ``appliance`` processes
    the tests start load bytecode instead of compiling every module again (where
    ``PYTHONDONTWRITEBYTECODE`` is set, no process would keep what it compiled)."""
    if sys.dont_write_bytecode and not _in_worker(session.config):
        compileall.compile_dir(str(ROOT / "appliance"), quiet=1, workers=0)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _in_worker(session.config):
        binary_build.start_if_needed([item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """In the controller: start the one binary build of the session (workers wait)."""
    binary_build.start_if_needed(ids)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """How ``pytest -n --dist loadgroup`` shares the tests out (see ``tests/workers.py``);
    last, so ``-m`` and ``--deselect`` have chosen the tests by their own ids first."""
    workers.plan(config, items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _in_worker(session.config):
        binary_build.stop()


@pytest.fixture(autouse=True)
def _every_test_on_postgresql(request: pytest.FixtureRequest,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``TEST_BACKEND=postgresql make test``: every appliance process of every test on a
    fresh PostgreSQL schema (tests that read the SQLite file itself then fail: a way to
    find what does not run on PostgreSQL yet, not a second suite)."""
    if os.environ.get("TEST_BACKEND") == "postgresql" and "backend" not in request.fixturenames:
        monkeypatch.setenv("APPLIANCE_DATABASE_URL", request.getfixturevalue("pg_url"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store the test's appliance processes use (see the module's docstring)."""
    if request.param == "postgresql":
        monkeypatch.setenv("APPLIANCE_DATABASE_URL", request.getfixturevalue("pg_url"))
    else:
        monkeypatch.delenv("APPLIANCE_DATABASE_URL", raising=False)
    return str(request.param)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A new SQLite store in the test's directory, opened as the appliance opens it."""
    s = Store.open(str(tmp_path / "appliance.db"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def server(data_dir: Path) -> Iterator[Server]:
    srv = Server(data_dir).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def api_key(server: Server) -> str:
    return create_account(server.data_dir, "acme")


@pytest.fixture
def api(server: Server, api_key: str) -> Iterator[httpx.Client]:
    with server.client(api_key) as client:
        yield client
