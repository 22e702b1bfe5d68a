"""Opening connections and bringing the database to the current schema.

``schema.sql`` (repository root, bundled in the package) is the current schema;
``PRAGMA user_version`` records which version a file is at. A new file gets the
whole schema; an older file gets the steps in
:data:`appliance.store.migrations.MIGRATIONS` in order. A file
from a newer appliance is refused rather than guessed at.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from appliance.store import dup_key_triggers
from appliance.store.count_triggers import sqlite_ddl
from appliance.store.migrations import MIGRATIONS

SCHEMA_VERSION = 24
# Beside the package's modules, in a checkout, an installed wheel and the one-file
# executable alike (build/appliance.spec bundles it there). Read by path: importlib's
# resource readers cost a new server ~10 ms of imports (tempfile, shutil, zipfile).
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema.sql"


class SchemaTooNew(RuntimeError):
    """The database was written by a newer appliance."""


def schema_sql() -> str:
    """The schema a new SQLite database gets: ``schema.sql``, then the count triggers and
    the one that clears an ended message's duplicate-today key."""
    tables = SCHEMA_FILE.read_text(encoding="utf-8")
    return f"{tables}\n{sqlite_ddl()}\n{dup_key_triggers.SQLITE_DDL}"


# Prepared statements a connection keeps, by their text. A writer's units write many
# rows at once in statements whose text grows with the rows (``VALUES`` and ``IN``
# lists), so a flood's batches, each of its own size, come as many distinct texts; and
# apsw's cache puts a statement back after each use in turn, so it holds the last so
# many statements run, not the most used. With SQLite's default of 100, one statement
# in ten of a report flood was parsed again (50-100 µs each); with 500, one in twenty.
# What a kept statement weighs is bounded by ``Dialect.rows_a_statement``.
WRITER_STATEMENTS = 500
READER_STATEMENTS = 100


def open_connection(path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                    readonly: bool = False) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READONLY if readonly else (
        apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    conn = apsw.Connection(path, flags=flags, statementcachesize=(
        READER_STATEMENTS if readonly else WRITER_STATEMENTS))
    conn.set_busy_timeout(busy_timeout_ms)
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'FULL' else 'NORMAL'}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    # Readers run small queries and keep a small cache; the writer keeps 32 MB.
    conn.execute(f"PRAGMA cache_size={-8000 if readonly else -32000}")
    return conn


def user_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(path: str) -> int:
    """Create or upgrade the database at ``path``; return the version it is now at."""
    conn = open_connection(path)
    try:
        version = user_version(conn)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{path} has schema version {version}; this appliance knows up to "
                f"{SCHEMA_VERSION}. Run a newer appliance or restore an older backup."
            )
        if version == SCHEMA_VERSION:
            return version
        with conn:
            if version == 0:
                conn.execute(schema_sql())
            else:
                # In order; a number with no step is one this line of the schema never had.
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    if step in MIGRATIONS:
                        MIGRATIONS[step](conn)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return SCHEMA_VERSION
    finally:
        conn.close()
