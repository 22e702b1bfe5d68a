"""Version 22 of the schema: routes and failover (ROUTE-3) (frozen).

A message keeps the route that chose its provider (``route``: the prefix matched; NULL:
none, the request named the provider or no route matched) and what each attempt came to
at each provider (``attempts_log``: one line ``provider<TAB>outcome<TAB>epoch ms`` an
attempt or move, appended by the unit that records it: :mod:`appliance.sending.attempt_log`).
A campaign says whether its messages follow their routes (``routed``: 1) or go through
the provider it names. Messages and campaigns from before have none: they keep the
provider they were given. No index is added: the sender's write path stays as it was.
"""

from __future__ import annotations

import apsw


def add_routes(conn: apsw.Connection) -> None:
    """Version 22 (ROUTE-3): the columns above."""
    sqlite = isinstance(conn, apsw.Connection)
    # On PostgreSQL the step may meet its own work (a database set back a version by
    # hand, as tests of the steps before it do): each statement is one it can take again.
    text, integer, again = ("TEXT", "INTEGER", "") if sqlite else (
        'TEXT COLLATE "C"', "BIGINT", " IF NOT EXISTS")
    conn.execute(f"ALTER TABLE messages ADD COLUMN{again} route {text}")
    conn.execute(f"ALTER TABLE messages ADD COLUMN{again} attempts_log {text}")
    conn.execute(f"ALTER TABLE campaigns ADD COLUMN{again} routed {integer} NOT NULL"
                 " DEFAULT 0")
