"""The outbox's triggers switched on or off (OPS-5, TEAM-2).

They exist while some receiver does: ``[webhooks]`` configured at the last start, or an
account with a receiver of its own. Off, a state change costs what it did before OPS-5.
On SQLite they are made afresh each time they are switched on (a newer version's
definitions take over); on PostgreSQL :func:`appliance.store.pg_triggers.install` makes
them, and leaves them be when they are already these.
"""

from __future__ import annotations

from appliance.store import dialect, pg_triggers, webhook_triggers
from appliance.store.connection import Connection


def switch(conn: Connection, on: bool) -> None:
    """Make the outbox's triggers (``on``) or drop them (a part of a write unit)."""
    if dialect.of(conn).is_postgresql:
        pg_triggers.install(conn, webhooks=on)
        return
    for name in webhook_triggers.NAMES:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    if on:
        conn.execute(webhook_triggers.sqlite_ddl())
