"""The count triggers, defined once and written out for each engine.

The kept counts of :mod:`appliance.store.rollups` move in the transaction of the change
that moves them, by triggers:

* ``row_counts`` by key for each table of :data:`COUNTED`, on every insert, update of
  the counted column and delete;
* ``message_counts`` and ``row_counts`` (``messages``) when a counted message is deleted
  (:data:`MESSAGES_DELETE`; the other message changes are folded by
  :func:`appliance.store.rollups.fold`).

:func:`sqlite_ddl` writes them as SQLite triggers (``schema.sql``'s, through
:func:`appliance.store.schema.schema_sql`; the version-8 migration keeps its own frozen
text, which this writes again word for word). :data:`PG_FUNCTIONS` and
:func:`pg_triggers` write them as PL/pgSQL functions and the triggers that call them,
installed by :func:`appliance.store.pg_triggers.install`; on PostgreSQL each session
counts into rows of its own (:data:`STRIPE_SEPARATOR`, explained there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.store.trigger_sql import PgTrigger

# pg_advisory_xact_lock key: "counts" in ASCII, as a bigint: taken only by a counted
# message's deletion (retention), which moves message_counts rows (appliance.store.pg_triggers).
COUNTS_LOCK: Final = int.from_bytes(b"\0\0counts", "big")


@dataclass(frozen=True)
class Counted:
    """A table whose rows are counted in ``row_counts`` by one key."""

    table: str
    column: str  # the column whose update moves the count
    key: str  # the key as SQL of the row {r}
    # The SQLite trigger's WHEN, of {old} and {new}: the count moves when it holds.
    # (PostgreSQL's compares the keys: the same counts move, a change within one key
    # being -1 and +1 of that key.)
    moved: str


COUNTED: Final = (
    Counted("report_inbox", "outcome", "coalesce({r}.outcome, 'WAITING')",
            "{old}.outcome IS NOT {new}.outcome"),
    Counted("raw_reports", "parsed", "CASE {r}.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END",
            "{old}.parsed IS NOT {new}.parsed"),
    Counted("raw_inbound", "parsed", "CASE {r}.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END",
            "{old}.parsed IS NOT {new}.parsed"),
    Counted("suppressions", "source", "{r}.source", "{old}.source IS NOT {new}.source"),
    Counted("inbound_messages", "keyword",
            "CASE WHEN {r}.keyword IS NULL THEN 'other' ELSE 'stop' END",
            "({old}.keyword IS NULL) IS NOT ({new}.keyword IS NULL)"),
)

# A counted message deleted: its count goes (and the count row when it reaches 0). Of
# the deleted row {r}; SQLite's trigger runs it only WHEN it was counted.
MESSAGES_DELETE: Final = """
    UPDATE message_counts SET n = n - 1 WHERE account_id = {r}.account_id
        AND minute = {r}.created_at / 60000 AND state = {r}.counted_state;
    DELETE FROM message_counts WHERE account_id = {r}.account_id
        AND minute = {r}.created_at / 60000 AND state = {r}.counted_state AND n = 0;
    UPDATE row_counts SET n = n - 1 WHERE name = 'messages' AND key = {r}.counted_state;"""
MESSAGES_COUNTED: Final = "{r}.counted_state IS NOT NULL"


# -- SQLite --------------------------------------------------------------------------

def _sqlite_add(c: Counted) -> str:
    return (f"    INSERT INTO row_counts (name, key, n)\n"
            f"        VALUES ('{c.table}', {c.key.format(r='new')}, 1)\n"
            f"        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;\n")


def _sqlite_remove(c: Counted) -> str:
    return (f"    UPDATE row_counts SET n = n - 1\n"
            f"        WHERE name = '{c.table}' AND key = {c.key.format(r='old')};\n")


def _sqlite_triggers(c: Counted) -> str:
    moved = c.moved.format(old="old", new="new")
    return (f"CREATE TRIGGER {c.table}_counted_insert AFTER INSERT ON {c.table} BEGIN\n"
            f"{_sqlite_add(c)}END;\n\n"
            f"CREATE TRIGGER {c.table}_counted_update AFTER UPDATE OF {c.column} ON {c.table}\n"
            f"    WHEN {moved}\nBEGIN\n{_sqlite_remove(c)}{_sqlite_add(c)}END;\n\n"
            f"CREATE TRIGGER {c.table}_counted_delete AFTER DELETE ON {c.table} BEGIN\n"
            f"{_sqlite_remove(c)}END;\n")


def sqlite_ddl() -> str:
    """Every count trigger as SQLite's ``CREATE TRIGGER`` (each ``END;`` opens its line)."""
    messages = (f"CREATE TRIGGER messages_counted_delete AFTER DELETE ON messages\n"
                f"    WHEN {MESSAGES_COUNTED.format(r='old')}\n"
                f"BEGIN{MESSAGES_DELETE.format(r='old')}\nEND;\n")
    return "\n".join([messages, *(_sqlite_triggers(c) for c in COUNTED)])


# -- PostgreSQL ----------------------------------------------------------------------

# On PostgreSQL each database session counts into rows of its own: the key with
# ``#<backend pid>`` after it. Two processes' writers (each a session) never write the
# same count row, so a count takes no lock another process waits for, and no global one
# is needed to keep them from deadlocking (SCALE-2). Readers sum a key's rows
# (:func:`appliance.store.rollups.counts`); the ``rollups`` loop folds the rows of
# sessions that have ended into the key's own row (:func:`appliance.store.rollups.fold_stripes`).
STRIPE_SEPARATOR: Final = "#"

_MOVE = f"""
CREATE OR REPLACE FUNCTION row_counts_move(p_name text, p_from text, p_to text)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    stripe text := '{STRIPE_SEPARATOR}' || pg_backend_pid();
BEGIN
    IF p_from IS NOT NULL THEN
        INSERT INTO row_counts (name, key, n) VALUES (p_name, p_from || stripe, -1)
            ON CONFLICT (name, key) DO UPDATE SET n = row_counts.n - 1;
    END IF;
    IF p_to IS NOT NULL THEN
        INSERT INTO row_counts (name, key, n) VALUES (p_name, p_to || stripe, 1)
            ON CONFLICT (name, key) DO UPDATE SET n = row_counts.n + 1;
    END IF;
END $fn$"""


def _pg_counted_function(c: Counted) -> str:
    old, new = c.key.format(r="OLD"), c.key.format(r="NEW")
    return f"""
CREATE OR REPLACE FUNCTION {c.table}_counted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM row_counts_move('{c.table}', NULL, {new});
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM row_counts_move('{c.table}', {old}, {new});
    ELSE
        PERFORM row_counts_move('{c.table}', {old}, NULL);
    END IF;
    RETURN NULL;
END $fn$"""


_PG_MESSAGES_DELETE = f"""
CREATE OR REPLACE FUNCTION messages_counted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock({COUNTS_LOCK});{MESSAGES_DELETE.format(r="OLD")}
    RETURN NULL;
END $fn$"""

PG_FUNCTIONS: Final = (_MOVE, *(_pg_counted_function(c) for c in COUNTED), _PG_MESSAGES_DELETE)


def pg_triggers() -> tuple[PgTrigger, ...]:
    """The PostgreSQL count triggers, each calling its table's function."""
    out = [PgTrigger("messages_counted_delete", "messages", "messages_counted",
                     "AFTER DELETE", MESSAGES_COUNTED.format(r="OLD"))]
    for c in COUNTED:
        fn = f"{c.table}_counted"
        out += [
            PgTrigger(f"{c.table}_counted_insert", c.table, fn, "AFTER INSERT"),
            PgTrigger(f"{c.table}_counted_update", c.table, fn, f"AFTER UPDATE OF {c.column}",
                      f"{c.key.format(r='OLD')} IS DISTINCT FROM {c.key.format(r='NEW')}"),
            PgTrigger(f"{c.table}_counted_delete", c.table, fn, "AFTER DELETE"),
        ]
    return tuple(out)
