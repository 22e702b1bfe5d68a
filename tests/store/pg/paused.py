"""A connection that stops mid-unit, as a process does between two statements, so a test
can have another process's unit run in that gap."""

from __future__ import annotations

import threading
from typing import Any

from appliance.store.pg import PgConnection


class PausedAfter:
    """Runs every statement on ``conn``; after the first that starts with ``prefix`` it
    sets :attr:`reached` and waits until :attr:`go` is set."""

    def __init__(self, conn: PgConnection, prefix: str) -> None:
        self.conn = conn
        self.prefix = prefix
        self.reached = threading.Event()
        self.go = threading.Event()

    def execute(self, sql: str, params: Any = None, /) -> Any:
        cursor = self.conn.execute(sql, params)
        if sql.startswith(self.prefix) and not self.reached.is_set():
            self.reached.set()
            assert self.go.wait(10)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)
