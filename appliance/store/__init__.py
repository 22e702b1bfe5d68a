"""The store: one writer thread, a pool of readers, over one SQLite file or PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from appliance.store.checkpointer import Checkpointer
from appliance.store.readers import Readers
from appliance.store.schema import migrate
from appliance.store.writer import Writer

if TYPE_CHECKING:
    from appliance.config import Settings
    from appliance.store.pg_store import PgStore


@dataclass
class Store:
    writer: Writer
    readers: Readers
    checkpointer: Checkpointer

    @overload
    @classmethod
    def open(cls, path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
             read_connections: int = 4) -> Store: ...

    @overload
    @classmethod
    def open(cls, path: Settings) -> Store | PgStore: ...

    @classmethod
    def open(cls, path: str | Settings, synchronous: str = "FULL",
             busy_timeout_ms: int = 5000, read_connections: int = 4) -> Store | PgStore:
        """The SQLite file at ``path``; or, given the settings, the backend they name:
        PostgreSQL when ``database_url`` is set, else the data dir's SQLite file."""
        if not isinstance(path, str):
            settings = path
            if settings.database_url:
                from appliance.store.pg_store import PgStore

                return PgStore.open(settings.database_url, synchronous=settings.synchronous,
                                    busy_timeout_ms=settings.busy_timeout_ms,
                                    read_connections=settings.read_connections)
            return cls.open(str(settings.db_path), synchronous=settings.synchronous,
                            busy_timeout_ms=settings.busy_timeout_ms,
                            read_connections=settings.read_connections)
        migrate(path)
        writer = Writer(path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)
        writer.start()
        readers = Readers(path, size=read_connections, busy_timeout_ms=busy_timeout_ms)
        checkpointer = Checkpointer(path, busy_timeout_ms=busy_timeout_ms)
        checkpointer.start()
        return cls(writer, readers, checkpointer)

    def close(self) -> None:
        self.checkpointer.stop()
        self.writer.stop()  # the last connection to close checkpoints the WAL
        self.readers.close()
