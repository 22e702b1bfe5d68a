"""The schema on PostgreSQL: created from ``schema.sql``, versioned in a table.

A new database gets :func:`appliance.store.dialect.postgresql_schema` of the bundled
``schema.sql`` and a one-row table ``appliance_schema (version)`` (PostgreSQL has no
``user_version``). Several processes may start at once against one database: the whole
migration runs in one transaction under an advisory lock, so exactly one of them
creates or upgrades the schema and the others find it done (DDL is transactional in
PostgreSQL: a migration that fails leaves nothing behind).

The triggers (the kept counts, and the webhook outbox's while webhooks are on) are
PL/pgSQL functions of their own (:mod:`appliance.store.pg_triggers`): :func:`create`
installs the count triggers with the tables, and every :func:`migrate` installs them
again (the outbox's as they were), so a newer appliance's definitions take over at its
first start; an install that would change nothing changes nothing.

A database at an older version gets the steps of ``MIGRATIONS`` after it, run through
the same :class:`~appliance.store.pg.PgConnection` as every unit, so a step written in
portable SQL serves both backends. :data:`FIRST_VERSION` is the first version served on
PostgreSQL: no PostgreSQL database can be older, so the steps up to it are SQLite's
history only.
"""

from __future__ import annotations

from typing import Any, Final

from appliance.store import dialect, pg_triggers
from appliance.store.errors import NotAnApplianceDatabase
from appliance.store.migrations import MIGRATIONS
from appliance.store.pg import PgConnection
from appliance.store.schema import SCHEMA_VERSION, SchemaTooNew, schema_sql

VERSION_TABLE: Final = "appliance_schema"
FIRST_VERSION: Final = 5
# pg_advisory_xact_lock key of the migration: "appliance" in ASCII, as a bigint.
MIGRATION_LOCK: Final = int.from_bytes(b"applianc", "big") >> 1


def postgresql_schema_sql() -> str:
    return dialect.postgresql_schema(schema_sql())


def version(conn: PgConnection) -> int:
    """The schema version of the database (0: no appliance schema in it)."""
    exists = conn.execute("SELECT to_regclass(?) IS NOT NULL", (VERSION_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def user_tables(conn: PgConnection) -> list[str]:
    """The tables of the current schema (``search_path``'s first), by name."""
    return [str(r[0]) for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()"
        " ORDER BY c.relname")]


def create(conn: PgConnection, *, triggers: bool = True) -> None:
    """The current schema and its version, in the caller's transaction.

    ``triggers=False`` leaves the triggers out: ``migrate --to`` copies rows whose
    counts are copied too, and installs them after the copy
    (:func:`appliance.store.transfer.copy_to_postgresql`)."""
    conn.execute(postgresql_schema_sql())
    conn.execute(f"CREATE TABLE {VERSION_TABLE} (version BIGINT NOT NULL)")
    conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)", (SCHEMA_VERSION,))
    if triggers:
        pg_triggers.install(conn, webhooks=False)


def migrate(conn: PgConnection, where: str = "the database") -> int:
    """Create or upgrade the schema; return the version it is now at."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        found = version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{where} has schema version {found}; this appliance knows up to"
                f" {SCHEMA_VERSION}. Run a newer appliance.")
        if found == 0:
            others = user_tables(conn)
            if others:
                raise NotAnApplianceDatabase(
                    f"{where} has tables ({', '.join(others[:5])}) but no appliance schema;"
                    " give the appliance a database of its own")
            create(conn)
        elif found < SCHEMA_VERSION:
            if found < FIRST_VERSION:
                raise SchemaTooNew(f"{where} has schema version {found}, older than any"
                                   " served on PostgreSQL")
            for step in range(found + 1, SCHEMA_VERSION + 1):
                run: Any = MIGRATIONS.get(step)
                if run is not None:  # a version without a step changes nothing (as on SQLite)
                    run(conn)
            conn.execute(f"UPDATE {VERSION_TABLE} SET version = ?", (SCHEMA_VERSION,))
        # This version's triggers; the outbox's stay on or off until the service's start
        # says (appliance.webhooks.outbox.set_receiver).
        pg_triggers.install(conn, webhooks=pg_triggers.webhooks_installed(conn))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction and not conn.broken:
            conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION
