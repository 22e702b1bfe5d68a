"""A connection that stops mid-unit, as a process does between two statements, so a test
can have another process's unit run in that gap."""

from __future__ import annotations

import threading
from collections.abc import Callable
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


class UnitThread:
    """A write unit run in a thread of its own, as another process runs it: ``BEGIN``,
    ``unit(conn)``, ``COMMIT``, or ``ROLLBACK`` when it raises. :attr:`value` or
    :attr:`error` says what came of it once it is over."""

    def __init__(self, conn: Any, unit: Callable[[Any], Any]) -> None:
        self.conn = conn
        self.unit = unit
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        self.conn.execute("BEGIN")
        try:
            self.value = self.unit(self.conn)
        except Exception as exc:  # what the route would have answered, or a deadlock
            self.error = exc
            self.conn.execute("ROLLBACK")
        else:
            self.conn.execute("COMMIT")

    def start(self) -> UnitThread:
        self.thread.start()
        return self

    def waits(self, for_s: float = 0.3) -> bool:
        """Whether the unit is still running ``for_s`` after this is asked: it waits
        for a lock another unit holds."""
        self.thread.join(for_s)
        return self.thread.is_alive()

    def finish(self, within_s: float = 10) -> UnitThread:
        self.thread.join(within_s)
        assert not self.thread.is_alive(), "the unit did not finish"
        return self
