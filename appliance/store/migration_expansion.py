"""Version 23 of the schema: a campaign's messages in the order of its list's numbers
(frozen).

A campaign records the last number whose message exists (``queued_after``; NULL: none
yet) and its messages are created in the order of the list's numbers, read from the
list's ``UNIQUE (list_id, msisdn)`` index: each chunk's inserts are then a run of
neighbours in every index of ``messages`` keyed by the number, whatever order the list
was imported in. A campaign part-way at the upgrade keeps ``queued_through`` (the
contacts before it by id have their messages) and goes on with the rest, by number.
"""

from __future__ import annotations

import apsw


def add_campaign_number_order(conn: apsw.Connection) -> None:
    """Version 23: the column above."""
    sqlite = isinstance(conn, apsw.Connection)
    # On PostgreSQL the step may meet its own work (a database set back a version by
    # hand, as tests of the steps before it do): the statement can be taken again.
    text, again = ("TEXT", "") if sqlite else ('TEXT COLLATE "C"', " IF NOT EXISTS")
    conn.execute(f"ALTER TABLE campaigns ADD COLUMN{again} queued_after {text}")
