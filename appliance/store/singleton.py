"""Loops that must run in one process at a time, under a PostgreSQL advisory lock.

Several ``appliance serve`` processes may share one PostgreSQL database; a loop such as
the cut-off or retention is meant to run in one of them. :class:`Singleton` is that
loop's leadership: ``try_lead()`` before each step says whether this process is the one
(it takes ``pg_try_advisory_lock`` on a connection of its own and keeps it; a process
that dies or loses that connection loses the lock with it, and the next process to ask
takes over). On SQLite there is one server per data dir (the data dir lock), so every
singleton leads.

The lock makes the work tidy, not correct: a leader whose connection the server has
already dropped learns it at its next ``try_lead()``, so for a moment two may run. The
units such loops write are guarded (``WHERE state IN (...)``), so a step done twice
changes nothing the second time. For a unit that must not even start twice,
:func:`in_unit` takes the transaction-level lock inside the unit itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import TYPE_CHECKING

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.errors import StoreError

if TYPE_CHECKING:  # psycopg is imported only where a database_url asks for it
    from appliance.store.pg import PgConnection

log = logging.getLogger("appliance.store")


def lock_key(name: str) -> int:
    """The advisory lock's bigint for ``name`` (stable across processes and versions)."""
    digest = hashlib.sha256(f"appliance:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Singleton:
    """Whether this process leads the loop called ``name``."""

    def __init__(self, name: str, database_url: str = "") -> None:
        self.name = name
        self.database_url = database_url
        self.key = lock_key(name)
        self._conn: PgConnection | None = None
        self._held = False

    @property
    def held(self) -> bool:
        return self._held if self.database_url else True

    def try_lead(self) -> bool:
        """True when this process leads (took the lock now, or still holds it)."""
        if not self.database_url:
            return True
        try:
            if self._held and self._conn is not None and not self._conn.broken:
                self._conn.execute("SELECT 1")  # still connected: still holding it
                return True
            self._drop()
            from appliance.store.pg import PgConnection

            self._conn = PgConnection.connect(self.database_url,
                                              application_name=f"appliance-{self.name}")
            row = self._conn.execute("SELECT pg_try_advisory_lock(?)", (self.key,)).fetchone()
            self._held = bool(row and row[0])
        except StoreError as exc:
            if self._held:
                log.warning("%s: lost the lead (%s)", self.name, exc)
            self._drop()
            return False
        if not self._held:
            self._drop()  # ask again next time on a fresh connection: no idle one kept
        return self._held

    def release(self) -> None:
        if self._conn is not None and self._held and not self._conn.broken:
            with contextlib.suppress(StoreError):
                self._conn.execute("SELECT pg_advisory_unlock(?)", (self.key,))
        self._drop()

    def _drop(self) -> None:
        self._held = False
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def in_unit(conn: Connection, name: str) -> bool:
    """Inside a write unit: whether no other process runs a unit under ``name`` now
    (``pg_try_advisory_xact_lock``, held to the unit's commit). Always True on SQLite."""
    if not dialect.of(conn).is_postgresql:
        return True
    row = conn.execute("SELECT pg_try_advisory_xact_lock(?)", (lock_key(name),)).fetchone()
    return bool(row and row[0])


def one_at_a_time(conn: Connection, name: str) -> None:
    """Inside a write unit: wait until no other process runs a unit under ``name``, and
    keep it to this unit's commit (``pg_advisory_xact_lock``). Nothing on SQLite, whose
    one writer already runs one unit at a time."""
    if dialect.of(conn).is_postgresql:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (lock_key(name),))
