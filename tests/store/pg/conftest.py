"""PostgreSQL fixtures: one throwaway server per session, a new database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from appliance.store import Store
from appliance.store.pg import PgConnection
from appliance.store.pg_store import open_postgresql
from tests.pg_server import PgServer, pg_server, pg_url

__all__ = ["PgServer", "pg_server", "pg_url"]


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[PgConnection]:
    conn = PgConnection.connect(pg_url)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store[PgConnection]]:
    store = open_postgresql(pg_url, read_connections=2)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[PgConnection, PgConnection]]:
    """Two connections to one database with the schema and an account, as two
    processes have them."""
    from appliance.store import pg_schema

    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        pg_schema.migrate(a)
        a.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        yield a, b
    finally:
        a.close()
        b.close()
