"""Version 21 of the schema: each account its own webhook receiver (TEAM-2, frozen).

``account_receivers`` holds an account's receiver (its URL and the secret its events
are signed with) and that receiver's delivery health, the same columns as
``webhook_receiver`` (the ``[webhooks]`` receiver's). Every outbox row names the
receiver it goes to (``receiver``: the account's id, ``0`` for the ``[webhooks]``
one), so events already written keep going where they went: to ``[webhooks]``. An
inbound message forwarded (TEAM-3, ``inbound.received``) is an outbox row too,
``inbound_id`` naming it. The due heads are indexed by receiver, so one receiver's
backlog is never read to find another's, and the waiting events by receiver, for each
receiver's health.
"""

from __future__ import annotations

import apsw

from appliance.store import dialect

_TABLE = """
CREATE TABLE account_receivers (
    account_id            INTEGER PRIMARY KEY REFERENCES accounts(id),
    url                   TEXT    NOT NULL,
    secret                TEXT    NOT NULL,
    delivered             INTEGER NOT NULL DEFAULT 0,
    failed_attempts       INTEGER NOT NULL DEFAULT 0,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    paused_until          INTEGER NOT NULL DEFAULT 0,
    last_success_at       INTEGER,
    last_error            TEXT,
    last_error_at         INTEGER,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
)"""


def add_account_receivers(conn: apsw.Connection) -> None:
    """Version 21 (TEAM-2, TEAM-3): ``account_receivers``; the outbox's ``receiver``
    (every existing row: ``0``, the ``[webhooks]`` receiver) and ``inbound_id``."""
    sqlite = isinstance(conn, apsw.Connection)
    # On PostgreSQL the step may meet its own work (a database set back a version by
    # hand, as tests of the steps before it do): each statement is one it can take again.
    integer, again = ("INTEGER", "") if sqlite else ("BIGINT", " IF NOT EXISTS")
    table = _TABLE if sqlite else dialect.postgresql_schema(_TABLE)
    conn.execute(table.replace("CREATE TABLE", f"CREATE TABLE{again}", 1))
    conn.execute(f"ALTER TABLE webhook_outbox ADD COLUMN{again} receiver {integer}"
                 " NOT NULL DEFAULT 0")
    conn.execute(f"ALTER TABLE webhook_outbox ADD COLUMN{again} inbound_id {integer}")
    conn.execute("DROP INDEX IF EXISTS webhook_outbox_due")
    conn.execute("CREATE INDEX webhook_outbox_due ON webhook_outbox (receiver, next_try_at)"
                 " WHERE next_try_at IS NOT NULL")
    conn.execute(f"CREATE INDEX{again} webhook_outbox_waiting ON webhook_outbox"
                 " (receiver, id) WHERE delivered_at IS NULL")
