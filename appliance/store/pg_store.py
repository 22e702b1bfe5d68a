"""The store on PostgreSQL: the one writer and readers, over a database server.

* **The writer** is :class:`appliance.store.writer.Writer` over
  :class:`appliance.store.pg_engine.PgEngine`: the same thread, lanes, group commit and
  hand-back as on SQLite, on a connection of its own that is made again when lost.

* **The readers** are a pool (psycopg-pool) of at most ``read_connections``
  connections; each read unit runs in one ``REPEATABLE READ READ ONLY`` transaction:
  every query of the unit sees one snapshot, as on SQLite.

Units are the same functions: each gets a :class:`~appliance.store.pg.PgConnection`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import psycopg
import psycopg_pool

from appliance.store.errors import StorageUnavailable
from appliance.store.pg import PgConnection, configure_types, store_error
from appliance.store.pg_engine import CUSTOM_PLANS, pg_writer
from appliance.store.pg_schema import migrate

if TYPE_CHECKING:
    from appliance.store import Store

T = TypeVar("T")


def _configure_reader(conn: psycopg.Connection[Any]) -> None:
    configure_types(conn)
    conn.execute(CUSTOM_PLANS)

def in_snapshot(conn: PgConnection, unit: Callable[[PgConnection], T]) -> T:
    """Run ``unit`` on ``conn`` in one read-only snapshot (``REPEATABLE READ``)."""
    if conn.in_transaction:
        return unit(conn)
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        return unit(conn)
    finally:
        if conn.in_transaction and not conn.broken:
            conn.execute("COMMIT")


class PgReaders:
    """A pool of read connections; each read unit in one snapshot."""

    def __init__(self, url: str, size: int = 4, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=size, open=False, timeout=connect_timeout_s,
            name="appliance-readers", check=psycopg_pool.ConnectionPool.check_connection,
            kwargs={"autocommit": True, "application_name": "appliance-reader",
                    "connect_timeout": max(1, int(connect_timeout_s))},
            configure=_configure_reader)
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg_pool.PoolTimeout as exc:
            self.pool.close()
            raise StorageUnavailable(f"cannot connect to PostgreSQL for reading ({exc})") from exc

    def call(self, unit: Callable[[PgConnection], T]) -> T:
        try:
            with self.pool.connection() as raw:
                return in_snapshot(PgConnection(raw, configured=True), unit)
        except psycopg_pool.PoolTimeout as exc:
            raise StorageUnavailable(f"no PostgreSQL connection to read with ({exc})") from exc
        except psycopg.Error as exc:  # from the pool's own statements
            raise store_error(exc) from exc

    async def run(self, unit: Callable[[PgConnection], T]) -> T:
        return await anyio.to_thread.run_sync(self.call, unit)

    def close(self) -> None:
        self.pool.close()


def open_postgresql(url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                    read_connections: int = 4,
                    connect_timeout_s: float = 10.0) -> Store[PgConnection]:
    """The store over the PostgreSQL database at ``url``: its schema created or brought
    up to date, the writer started, the readers' pool open."""
    from appliance.store import Store

    conn = PgConnection.connect(url, application_name="appliance-migrate",
                                connect_timeout_s=connect_timeout_s)
    try:
        migrate(conn, where=redacted(url))
    finally:
        conn.close()
    writer = pg_writer(url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms,
                       connect_timeout_s=connect_timeout_s)
    writer.start()
    try:
        readers = PgReaders(url, size=read_connections, connect_timeout_s=connect_timeout_s)
    except BaseException:
        writer.stop()
        raise
    return Store(writer, readers)


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    from appliance.config import mask_database_url

    return mask_database_url(url)
