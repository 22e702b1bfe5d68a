"""The store: one writer thread, a pool of readers, one SQLite file."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.store.checkpointer import Checkpointer
from appliance.store.readers import Readers
from appliance.store.schema import migrate
from appliance.store.writer import Writer


@dataclass
class Store:
    writer: Writer
    readers: Readers
    checkpointer: Checkpointer

    @classmethod
    def open(cls, path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
             read_connections: int = 4) -> Store:
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
