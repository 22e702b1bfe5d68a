"""The consent check at the last moment (IYS-2): just before a commercial message is
marked ``SENDING``, in the same unit, its number must still have consent.

A RET committed before the mark's unit cancels the message (``CANCELLED``, error
``no_consent``): none is submitted after the refusal's commit. On PostgreSQL the consent
rows are locked (``FOR UPDATE``) before they are judged: a RET being applied at another
connection (:func:`appliance.optout.consents.apply_one` locks the same row) either
commits first, and is seen, or waits until the mark has committed; on SQLite the one
writer runs one unit at a time. The same unit notes when the last commercial message to
each number went (``consents.last_commercial_at``, the refusals report's column).
"""

from __future__ import annotations

from typing import Any

from appliance.optout.consents import ALLOWED_SQL, NO_CONSENT
from appliance.sending.commercial import COMMERCIAL
from appliance.store import dialect
from appliance.store.connection import Connection


def refused_now(conn: Connection, ids: list[int], now_ms: int) -> set[int]:
    """Of these reserved messages, cancel the commercial ones whose number has no consent
    now (part of the mark's unit); returns the ids cancelled."""
    marks = ",".join("?" * len(ids))
    rows: list[Any] = conn.execute(
        f"SELECT id, account_id, msisdn FROM messages WHERE id IN ({marks})"
        " AND message_type = ?", (*ids, COMMERCIAL)).fetchall()
    if not rows:
        return set()
    lock = dialect.of(conn).for_update
    allowed: set[tuple[int, str]] = set()
    for _id, account_id, msisdn in sorted(rows, key=lambda r: (int(r[1]), str(r[2]))):
        found = conn.execute(
            f"SELECT k.id FROM consents k WHERE k.account_id = ? AND k.msisdn = ?"
            f" AND {ALLOWED_SQL}{lock}", (account_id, msisdn)).fetchone()
        if found is not None:
            allowed.add((int(account_id), str(msisdn)))
    refused = {int(r[0]) for r in rows if (int(r[1]), str(r[2])) not in allowed}
    if refused:
        marks = ",".join("?" * len(refused))
        conn.execute(
            "UPDATE messages SET state = 'CANCELLED', error = ?, updated_at = ?,"
            " claimed_at = NULL, finalised_at = COALESCE(finalised_at, ?)"
            f" WHERE id IN ({marks}) AND state IN ('QUEUED', 'RETRY')",
            (NO_CONSENT, now_ms, now_ms, *sorted(refused)))
    return refused


def note_sent(conn: Connection, marked: list[tuple[int, str]], now_ms: int) -> None:
    """``last_commercial_at`` for the numbers of commercial messages just marked."""
    for account_id, msisdn in sorted(set(marked)):
        conn.execute("UPDATE consents SET last_commercial_at = ? WHERE account_id = ?"
                     " AND msisdn = ?", (now_ms, account_id, msisdn))
