"""``appliance migrate --to postgresql://...``: a data dir's SQLite database, copied
whole into an empty PostgreSQL database.

The copy reads one SQLite snapshot (the file is first brought to the current schema,
as ``serve`` would) and writes one PostgreSQL transaction: the schema, then every
table in dependency order (a table after those it refers to), in batches through
``COPY``, then each identity's sequence set past the largest id (and, for
``AUTOINCREMENT`` tables, past the largest id SQLite ever gave, so a pruned id is never
given again), then the triggers (:mod:`appliance.store.pg_triggers`). The triggers come
after the rows: ``row_counts`` and ``message_counts`` are copied as SQLite kept them,
and a count trigger firing for each copied row would count every row twice (and an
outbox trigger would write an event per copied message). The outbox's are installed
when they were on in SQLite (webhooks configured at its last start). Before
committing, each table's rows are counted on both sides; any difference rolls the whole
copy back, so the target is either a verified copy or as empty as it was. A target
with tables in it is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import psycopg

from appliance.store import dialect, pg_triggers
from appliance.store.pg import PgConnection, store_error
from appliance.store.pg_schema import MIGRATION_LOCK, user_tables
from appliance.store.pg_schema import create as create_schema
from appliance.store.schema import migrate as migrate_sqlite
from appliance.store.schema import open_connection, schema_sql

BATCH_ROWS = 5000
Progress = Callable[[str, int, int], None]  # table, rows copied so far, rows in it


class TransferRefused(RuntimeError):
    """The copy cannot start (no source, a target that is not empty) or did not verify;
    the target is left as it was."""


@dataclass
class TableCopy:
    table: str
    source_rows: int
    target_rows: int


@dataclass
class TransferResult:
    tables: list[TableCopy] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(t.target_rows for t in self.tables)


def dependency_order(conn: apsw.Connection) -> list[str]:
    """The database's tables, each after every table it refers to."""
    tables = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " ORDER BY name")]
    needs = {t: {str(r[2]) for r in conn.execute(f'PRAGMA foreign_key_list("{t}")')} - {t}
             for t in tables}
    ordered: list[str] = []
    while needs:
        ready = sorted(t for t, deps in needs.items() if deps <= set(ordered))
        if not ready:
            raise TransferRefused(f"tables refer to each other in a cycle: {sorted(needs)}")
        ordered += ready
        for t in ready:
            del needs[t]
    return ordered


def _columns(conn: apsw.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _scalar(conn: apsw.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _sqlite_sequences(conn: apsw.Connection) -> dict[str, int]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'sqlite_sequence'"
    ).fetchone()
    if not exists:
        return {}
    return {str(name): int(seq) for name, seq in conn.execute(
        "SELECT name, seq FROM sqlite_sequence")}


def copy_to_postgresql(sqlite_path: Path, url: str, *, batch_rows: int = BATCH_ROWS,
                       progress: Progress | None = None) -> TransferResult:
    """Copy the SQLite database at ``sqlite_path`` into the empty database at ``url``."""
    started = time.monotonic()
    if not sqlite_path.is_file():
        raise TransferRefused(f"there is no database at {sqlite_path}")
    migrate_sqlite(str(sqlite_path))
    target = PgConnection.connect(url, application_name="appliance-migrate")
    source = open_connection(str(sqlite_path), readonly=True)
    try:
        found = user_tables(target)
        if found:
            raise TransferRefused(
                f"the target database is not empty (it has {', '.join(found[:5])}"
                f"{', ...' if len(found) > 5 else ''}): migrate copies into an empty database"
                " only, so that nothing in it is mixed with the copy")
        source.execute("BEGIN")  # one snapshot of the source for the whole copy
        try:
            result = _copy(source, target, batch_rows, progress)
        finally:
            source.execute("COMMIT")
    finally:
        source.close()
        target.close()
    result.seconds = time.monotonic() - started
    return result


def _copy(source: apsw.Connection, target: PgConnection, batch_rows: int,
          progress: Progress | None) -> TransferResult:
    target.execute("SET synchronous_commit = on")
    result = TransferResult()
    identities = dialect.identity_columns(schema_sql())
    sequences = _sqlite_sequences(source)
    target.execute("BEGIN")
    try:
        # Under the migration's lock: a server starting meanwhile waits, then finds it done.
        target.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        if user_tables(target):
            raise TransferRefused("the target database got tables while the copy started")
        create_schema(target, triggers=False)
        for table in dependency_order(source):
            total = _scalar(source, f'SELECT count(*) FROM "{table}"')
            _copy_table(source, target, table, total, batch_rows, progress)
            column = identities.get(table)
            if column:
                highest = max(sequences.get(table, 0), _scalar(
                    source, f'SELECT coalesce(max("{column}"), 0) FROM "{table}"'))
                if highest > 0:
                    target.execute("SELECT setval(pg_get_serial_sequence(?, ?), ?)",
                                   (table, column, highest))
            copied = int(target.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
            result.tables.append(TableCopy(table, total, copied))
        pg_triggers.install(target, webhooks=_webhooks_on(source))
        wrong = [t for t in result.tables if t.source_rows != t.target_rows]
        if wrong:
            raise TransferRefused("row counts differ after the copy: " + ", ".join(
                f"{t.table} {t.source_rows} in SQLite, {t.target_rows} in PostgreSQL"
                for t in wrong))
        target.execute("COMMIT")
    except BaseException:
        if target.in_transaction and not target.broken:
            target.execute("ROLLBACK")  # the schema too: the target is as empty as it was
        raise
    return result


def _webhooks_on(conn: apsw.Connection) -> bool:
    """Whether the SQLite database writes outbox events (its webhook triggers exist)."""
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'trigger'"
                        " AND name = 'messages_webhook_created'").fetchone() is not None


def _copy_table(source: apsw.Connection, target: PgConnection, table: str, total: int,
                batch_rows: int, progress: Progress | None) -> None:
    columns = _columns(source, table)
    names = ", ".join(f'"{c}"' for c in columns)
    copied = 0
    rows = source.execute(f'SELECT {names} FROM "{table}" ORDER BY rowid')
    try:
        with target.raw.cursor() as cur:
            while True:
                batch: list[Any] = []
                for row in rows:
                    batch.append(row)
                    if len(batch) >= batch_rows:
                        break
                if not batch:
                    break
                with cur.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                    for row in batch:
                        copy.write_row(row)
                copied += len(batch)
                if progress is not None:
                    progress(table, copied, total)
    except psycopg.errors.UntranslatableCharacter as exc:
        raise TransferRefused(f"{table}: a value cannot be stored in PostgreSQL ({exc})") from exc
    except psycopg.Error as exc:
        if "0x00" in str(exc):
            raise TransferRefused(
                f"{table}: a text value holds a NUL character, which PostgreSQL text cannot"
                " hold; nothing was copied") from exc
        raise store_error(exc) from exc
    if progress is not None and total == 0:
        progress(table, 0, 0)
