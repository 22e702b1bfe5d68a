"""The store: one writer thread, a pool of readers, over one SQLite file or PostgreSQL.

One type, :class:`Store`, whichever the engine: the writer is
:class:`appliance.store.writer.Writer` over the engine's
:class:`~appliance.store.writer.Engine`, the readers a :class:`ReadPool`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, overload

import apsw

from appliance.store.checkpointer import Checkpointer
from appliance.store.connection import Connection
from appliance.store.readers import Readers
from appliance.store.schema import migrate
from appliance.store.sqlite_engine import SqliteEngine
from appliance.store.writer import C, Writer

if TYPE_CHECKING:
    from appliance.config import Settings

T = TypeVar("T")


class ReadPool(Protocol[C]):
    """Read connections, each read unit in one snapshot: SQLite's
    :class:`~appliance.store.readers.Readers` or PostgreSQL's
    :class:`~appliance.store.pg_store.PgReaders`."""

    def call(self, unit: Callable[[C], T]) -> T: ...

    async def run(self, unit: Callable[[C], T]) -> T: ...

    def close(self) -> None: ...


@dataclass
class Store(Generic[C]):
    """The writer and the readers of one database. ``Store`` alone is SQLite's (its units
    get apsw's connection); ``Store[Connection]`` is the settings' choice of engine."""

    writer: Writer[C]
    readers: ReadPool[C]
    checkpointer: Checkpointer | None = None  # SQLite's WAL, checkpointed off the writer

    @overload
    @staticmethod
    def open(path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
             read_connections: int = 4) -> Store[apsw.Connection]: ...

    @overload
    @staticmethod
    def open(path: Settings) -> Store[Connection]: ...

    @staticmethod
    def open(path: str | Settings, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
             read_connections: int = 4) -> Store[apsw.Connection] | Store[Connection]:
        """The SQLite file at ``path``; or, given the settings, the engine they name:
        PostgreSQL when ``database_url`` is set, else the data dir's SQLite file."""
        if not isinstance(path, str):
            settings = path
            if settings.database_url:
                from appliance.store.pg_store import open_postgresql

                return open_postgresql(settings.database_url, synchronous=settings.synchronous,
                                       busy_timeout_ms=settings.busy_timeout_ms,
                                       read_connections=settings.read_connections)
            return Store.open(str(settings.db_path), synchronous=settings.synchronous,
                            busy_timeout_ms=settings.busy_timeout_ms,
                            read_connections=settings.read_connections)
        migrate(path)
        engine = SqliteEngine(path, synchronous, busy_timeout_ms)
        writer: Writer[apsw.Connection] = Writer(engine)
        writer.start()
        readers = Readers(path, size=read_connections, busy_timeout_ms=busy_timeout_ms)
        checkpointer = Checkpointer(path, busy_timeout_ms=busy_timeout_ms,
                                    wal_used=engine.wal_bytes)
        checkpointer.start()
        return Store(writer, readers, checkpointer)

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        self.writer.stop()  # SQLite: the last connection to close checkpoints the WAL
        self.readers.close()
