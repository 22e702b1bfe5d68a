"""A throwaway PostgreSQL server for the tests, in a temporary directory.

``PgServer.start()`` runs ``initdb`` and ``pg_ctl start`` from Debian's
``/usr/lib/postgresql/*/bin`` (or ``pg_ctl`` on the PATH) on a free port of 127.0.0.1.
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres``
system user the Debian package creates (``runuser -u postgres --``) in a directory it
owns. One server is shared by every test of a session (``pg_server`` fixture); each test
gets an empty database of its own (``pg_url``): a schema, first on its URL's search path,
which costs a millisecond where a ``CREATE DATABASE`` costs half a second.

When the binaries are missing the fixtures skip, saying how to install them.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUPERUSER = "appliance"
MISSING = ("PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and"
           " the PATH): apt-get install postgresql to run the PostgreSQL tests")


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    bindir: Path
    root: Path
    port: int
    run_as: str | None  # the system user the server runs as when we are root

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def url_for(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *args: str) -> list[str]:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        return [*prefix, *args]

    @classmethod
    def start(cls) -> PgServer:
        bindir = find_bindir()
        if bindir is None:
            raise FileNotFoundError(MISSING)
        run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise FileNotFoundError("running as root and there is no 'postgres' user to"
                                        " run PostgreSQL as") from None
            run_as = "postgres"
        root = Path(tempfile.mkdtemp(prefix="appliance-pg-"))
        if run_as:
            entry = pwd.getpwnam(run_as)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        server = cls(bindir, root, _free_port(), run_as)
        server._initdb()
        server._pg_ctl_start()
        return server

    def _initdb(self) -> None:
        subprocess.run(self._cmd(
            str(self.bindir / "initdb"), "-D", str(self.root / "data"), "-U", SUPERUSER,
            "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions",
        ), check=True, capture_output=True, timeout=120)

    def _pg_ctl_start(self) -> None:
        options = " ".join([
            f"-p {self.port}", "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.root}",
            # A test server: no fsync (the tests prove logic, not the disk), small memory.
            "-c fsync=off", "-c full_page_writes=off", "-c shared_buffers=32MB",
            "-c max_connections=100",
        ])
        subprocess.run(self._cmd(
            str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-l",
            str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start",
        ), check=True, capture_output=True, timeout=90)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.root / "server.log").read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"),
                                     "-m", "immediate", "-w", "stop"),
                           capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_counter = itertools.count(1)
TEST_DATABASE = "appliance_tests"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole session (skipped when none is installed)."""
    try:
        server = PgServer.start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        server.create_database(TEST_DATABASE)
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL whose database is empty: a schema of its own, first on its search path
    (a schema costs a millisecond where a database costs half a second)."""
    import psycopg

    schema = f"t{os.getpid()}_{next(_counter)}"
    base = pg_server.url_for(TEST_DATABASE)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{base}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
