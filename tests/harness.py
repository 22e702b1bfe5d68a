"""Real processes for tests: an ``appliance serve`` on 127.0.0.1, killed for real.

No mocks of our own storage or HTTP layer: tests talk HTTP to a server process over
a real SQLite file, and ``kill -9`` it when they need a crash.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


class FileClock:
    """The server's clock, moved by writing epoch ms into ``APPLIANCE_CLOCK_FILE``."""

    def __init__(self, path: Path, ms: int) -> None:
        self.path = path
        self.ms = ms
        self.set(ms)

    def set(self, ms: int) -> None:
        self.ms = ms
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(ms))
        tmp.replace(self.path)

    def advance(self, ms: int) -> None:
        self.set(self.ms + ms)

    @property
    def env(self) -> dict[str, str]:
        return {"APPLIANCE_CLOCK_FILE": str(self.path)}


def database_url() -> str:
    """The PostgreSQL database this test's appliance processes use ("" for SQLite: see
    the ``backend`` fixture)."""
    return os.environ.get("APPLIANCE_DATABASE_URL", "")


def db_rows(data_dir: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (``?`` placeholders) read from the store the test's appliance
    uses: the data dir's SQLite file (read-only), or its PostgreSQL database."""
    url = database_url()
    if url:
        from appliance.store import pg_store
        from appliance.store.pg import PgConnection

        pg = PgConnection.connect(url)
        try:
            return [tuple(r) for r in pg_store.in_snapshot(
                pg, lambda c: c.execute(sql, args).fetchall())]
        finally:
            pg.close()
    import apsw

    conn = apsw.Connection(str(data_dir / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]
    finally:
        conn.close()


def db_read(data_dir: Path, fn: Callable[[Any], T]) -> T:
    """``fn(conn)`` in one read snapshot of the store the test's appliance uses."""
    url = database_url()
    if url:
        from appliance.store import pg_store
        from appliance.store.pg import PgConnection

        pg = PgConnection.connect(url)
        try:
            return pg_store.in_snapshot(pg, fn)
        finally:
            pg.close()
    import apsw

    conn = apsw.Connection(str(data_dir / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return fn(conn)
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], T | None], timeout: float = 30.0,
             interval: float = 0.02, message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last: {last!r})")


def child_env() -> dict[str, str]:
    """This process's environment for an appliance child, without the variables only the
    tests read (``APPLIANCE_UPDATE_SCREENSHOTS``: the appliance refuses unknown
    ``APPLIANCE_*`` settings)."""
    return {k: v for k, v in os.environ.items() if k != "APPLIANCE_UPDATE_SCREENSHOTS"}


def appliance_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "appliance", *args]


def run_cli(*args: str, env: Mapping[str, str] | None = None, input: bytes | None = None,
            check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**child_env(), **(env or {})}
    proc = subprocess.run(appliance_cmd(*args), env=full_env, input=input.decode() if input
                          else None, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"appliance {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def create_account(data_dir: Path, name: str = "acme") -> str:
    out = run_cli("account", "create", name, "--data-dir", str(data_dir))
    return out.stdout.strip().splitlines()[-1]


class Server:
    """An ``appliance serve`` subprocess on a free port."""

    def __init__(self, data_dir: Path, config: Path | None = None,
                 env: Mapping[str, str] | None = None, command: str = "serve",
                 extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.config = config
        self.env = {**child_env(), "APPLIANCE_LOG_FORMAT": "json", **(env or {})}
        self.command = command
        self.extra_args = extra_args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> Server:
        args = [self.command, "--data-dir", str(self.data_dir), "--port", str(self.port),
                *self.extra_args]
        if self.config is not None:
            args += ["--config", str(self.config)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(appliance_cmd(*args), env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout, message="server to answer /healthz")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def restart(self) -> Server:
        self.port = self.port if self._port_free(self.port) else free_port()
        return self.start()

    @staticmethod
    def _port_free(port: int) -> bool:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def client(self, key: str | None = None, **kw: Any) -> httpx.Client:
        """A client of the API whose every ``/api/*`` JSON answer is checked against
        ``GET /api/openapi.json`` as it arrives (:func:`openapi_check`)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        hooks = {"response": [openapi_check]}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30,
                            event_hooks=hooks, **kw)


def openapi_check(response: httpx.Response) -> None:
    """Validate an ``/api/*`` JSON answer against the schema the OpenAPI description
    gives its route, method and status (an undescribed refusal: ``Error``); raises
    ``jsonschema.ValidationError`` when it does not fit."""
    from tests.openapi_answers import check_answer

    request = response.request
    if not request.url.path.startswith("/api/"):
        return
    if not response.headers.get("content-type", "").startswith("application/json"):
        return
    response.read()
    check_answer(request.method, request.url.path, response.status_code, response.json())
