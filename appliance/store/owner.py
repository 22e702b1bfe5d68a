"""This process as the holder of work it started, and whether another holder still lives.

Several ``appliance serve`` processes may share one PostgreSQL database. Work one of them
started and has not finished (a message ``SENDING``, an import job it is parsing) carries
its :data:`OWNER` (``lease_owner``). Each process holds, for its whole life, a
session-level advisory lock named after its owner (:class:`Liveness`); PostgreSQL drops
it when the process dies (``kill -9`` included: its connection closes with it) or loses
its connection. :func:`dead_owners` asks for those locks inside a write unit
(``pg_try_advisory_xact_lock``): an owner whose lock can be had is gone, so its work may
be taken over. The answer errs on the safe side: a live process whose connection was
dropped is taken for dead, and then its guarded units (``AND state = 'SENDING'``, ``AND
processed = ?``) change nothing, so nothing is done twice.

On SQLite there is one server per data dir: every owner but this process is gone.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable
from typing import Final

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.singleton import Singleton, lock_key

OWNER: Final = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _lock_name(owner: str) -> str:
    return f"process:{owner}"


class Liveness(Singleton):
    """This process's lock: held from start to exit (``try_lead`` again after a lost
    connection takes it back)."""

    def __init__(self, database_url: str) -> None:
        super().__init__(_lock_name(OWNER), database_url)


def dead_owners(conn: Connection, owners: Iterable[str | None]) -> set[str]:
    """Of ``owners``, those whose process is gone (inside a write unit)."""
    found = {o for o in owners if o and o != OWNER}
    if not dialect.of(conn).is_postgresql:
        return found
    dead: set[str] = set()
    for owner in sorted(found):
        row = conn.execute("SELECT pg_try_advisory_xact_lock(?)",
                           (lock_key(_lock_name(owner)),)).fetchone()
        if row and row[0]:
            dead.add(owner)
    return dead
