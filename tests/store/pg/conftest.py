"""PostgreSQL fixtures: one throwaway server per session, a new database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from appliance.store.pg import PgConnection
from appliance.store.pg_store import PgStore
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
def pg_store(pg_url: str) -> Iterator[PgStore]:
    store = PgStore.open(pg_url, read_connections=2)
    try:
        yield store
    finally:
        store.close()
