"""Counting the rows statements changed themselves, when triggers write too.

``Connection.changes()`` counts the last statement only; ``total_changes()`` counts
every row since the connection opened, *the rows triggers wrote included*. The status
webhook triggers (OPS-5, :mod:`appliance.webhooks.outbox`; they exist while webhooks
are on) add a ``webhook_outbox`` row for each message state change, so a count taken
from ``total_changes()`` around an ``executemany`` on ``messages`` would count each
changed message twice. :class:`DirectChanges` takes those rows back out: the outbox's
ids only grow within a transaction (nothing deletes from it while a state changes), so
the rows the triggers added are the growth of its largest id.
"""

from __future__ import annotations

import apsw


def _top_event(conn: apsw.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM webhook_outbox").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


class DirectChanges:
    """Rows changed by the statements run since it was made, not by triggers."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._total = conn.total_changes()
        self._events = _top_event(conn)

    def count(self) -> int:
        by_triggers = _top_event(self.conn) - self._events
        return int(self.conn.total_changes() - self._total - by_triggers)
