"""The throwaway server the PostgreSQL tests use: shared, quick, and skipped with a
reason where PostgreSQL is not installed."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests import pg_server as fixture
from tests.pg_server import MISSING, PgServer


def test_without_the_binaries_it_says_how_to_get_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fixture, "find_bindir", lambda: None)
    with pytest.raises(FileNotFoundError) as caught:
        PgServer.start()
    assert str(caught.value) == MISSING and "apt-get install postgresql" in MISSING


def test_one_server_for_the_session_an_empty_schema_per_test(pg_server: PgServer,
                                                             pg_url: str) -> None:
    started = time.monotonic()
    with psycopg.connect(pg_url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None and schema[0].startswith("t")
        assert conn.execute("SELECT count(*) FROM pg_tables"
                            " WHERE schemaname = current_schema()").fetchone() == (0,)
        user = conn.execute("SELECT current_user").fetchone()
        assert user == ("appliance",)
    assert time.monotonic() - started < 5
