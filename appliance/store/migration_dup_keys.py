"""Version 24 of the schema: the duplicate-today key held by the number's index (frozen).

Until version 23 a second unique index, ``messages_duplicate_today (dup_key)`` over the
live messages only, held one live message per key: every guarded message wrote an entry
in it besides its entry in ``messages_msisdn (account_id, msisdn)``. From version 24 the
number's index is unique and ends with the key, ``messages_msisdn (account_id, msisdn,
dup_key)``, and a message that ends ``REJECTED``, ``FAILED`` or ``CANCELLED`` has its key
cleared (a trigger on SQLite here; on PostgreSQL
:func:`appliance.store.pg_triggers.install` installs its own after the steps), so it
blocks nothing, as it left the partial index before. The keys of the messages that had
already ended are cleared here; a live message keeps its key, which the old index held
unique, so the new one takes them all.
"""

from __future__ import annotations

from typing import Final

import apsw

_ENDED_UNKEYED: Final = """CREATE TRIGGER messages_ended_unkeyed AFTER UPDATE OF state ON messages
    WHEN NEW.dup_key IS NOT NULL AND NEW.state IN ('REJECTED', 'FAILED', 'CANCELLED')
BEGIN
    UPDATE messages SET dup_key = NULL WHERE id = NEW.id;
END;
"""


def key_by_number(conn: apsw.Connection) -> None:
    """Version 24: the index, the keys of ended messages cleared, and the trigger.

    On PostgreSQL the step may meet its own work (a database set back a version by hand,
    as tests of the steps before it do): each statement can be taken again."""
    conn.execute("DROP INDEX IF EXISTS messages_duplicate_today")
    conn.execute("UPDATE messages SET dup_key = NULL WHERE dup_key IS NOT NULL"
                 " AND state IN ('REJECTED', 'FAILED', 'CANCELLED')")
    conn.execute("DROP INDEX IF EXISTS messages_msisdn")
    conn.execute("CREATE UNIQUE INDEX messages_msisdn ON messages (account_id, msisdn, dup_key)")
    if isinstance(conn, apsw.Connection):
        conn.execute(_ENDED_UNKEYED)
