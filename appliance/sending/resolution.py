"""The operator decides about ``UNCERTAIN`` messages (OPS-6): resend, or mark failed.

Either decision is a write unit that takes the message as the last unit left it
(locked on PostgreSQL), and is recorded in ``message_actions`` with who decided.
"""

from __future__ import annotations

from typing import Any

from appliance.reports.aggregate import message_state
from appliance.reports.states import FINAL_STATES
from appliance.sending.claims import PART_TO_SEND
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int

RESEND, MARK_FAILED = "resend", "mark_failed"
ACTIONS = (RESEND, MARK_FAILED)
RESEND_WARNING = ("the provider may already have this message: a resend can reach the"
                  " phone twice, and is billed again")


class NotUncertain(ValueError):
    """Only an ``UNCERTAIN`` message can be resolved; ``state`` is the one it has."""

    def __init__(self, state: str) -> None:
        super().__init__(f"the message is {state}, not UNCERTAIN: there is nothing to decide")
        self.state = state


def resolve_message(conn: Connection, message_id: int, action: str, actor: str,
                    now_ms: int) -> str:
    """Decide about one ``UNCERTAIN`` message (a write unit); returns its new state.

    ``resend``: the message and its uncertain parts go back to ``RETRY``, due now, and
    the sender submits them once more, exactly once (a report that arrives first, saying
    the provider had it after all, settles it instead). ``mark_failed``: its uncertain
    parts become ``FAILED``, final, never sent again; the message is the aggregate of
    its parts. Either is recorded in ``message_actions`` with who decided.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    # Locked, and read as the last unit left it: a report settled at another process
    # meanwhile either came first (then the message is no longer UNCERTAIN) or waits.
    lock = dialect.of(conn).for_update
    row: Any = conn.execute(f"SELECT state FROM messages WHERE id = ?{lock}",
                            (message_id,)).fetchone()
    state = "MISSING" if row is None else str(row[0])
    if state != "UNCERTAIN":
        raise NotUncertain(state)
    if action == RESEND:
        note = f"resend requested by {actor}: {RESEND_WARNING}"
        conn.execute("UPDATE message_parts SET state = ?, error = NULL, updated_at = ?"
                     " WHERE message_id = ? AND state = 'UNCERTAIN'",
                     (PART_TO_SEND, now_ms, message_id))
        conn.execute("UPDATE messages SET state = 'RETRY', error = ?, next_attempt_at = ?,"
                     " updated_at = ? WHERE id = ? AND state = 'UNCERTAIN'",
                     (note, now_ms, now_ms, message_id))
        new_state = "RETRY"
    else:
        note = f"marked failed by {actor}"
        conn.execute("UPDATE message_parts SET state = 'FAILED', error = ?, updated_at = ?,"
                     " finalised_at = COALESCE(finalised_at, ?)"
                     " WHERE message_id = ? AND state = 'UNCERTAIN'",
                     (note, now_ms, now_ms, message_id))
        states = [str(r[0]) for r in conn.execute(
            "SELECT state FROM message_parts WHERE message_id = ?", (message_id,))]
        new_state = message_state(states) if states else "FAILED"
        conn.execute("UPDATE messages SET state = ?, error = ?, updated_at = ?,"
                     " finalised_at = CASE WHEN ? THEN COALESCE(finalised_at, ?) END"
                     " WHERE id = ? AND state = 'UNCERTAIN'",
                     (new_state, note, now_ms, new_state in FINAL_STATES, now_ms, message_id))
    conn.execute("INSERT INTO message_actions (message_id, action, from_state, to_state, actor,"
                 " at) VALUES (?, ?, 'UNCERTAIN', ?, ?, ?)",
                 (message_id, action, new_state, actor, now_ms))
    return new_state


def resolve_campaign(conn: Connection, campaign_id: int, action: str, actor: str,
                     now_ms: int) -> int:
    """The same decision for every ``UNCERTAIN`` message of a campaign (a write unit);
    returns how many were resolved. One that a report settled at another process since
    it was found is no longer uncertain: it is left as the report made it."""
    ids = [as_int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE campaign_id = ? AND state = 'UNCERTAIN'", (campaign_id,))]
    resolved = 0
    for message_id in ids:
        try:
            resolve_message(conn, message_id, action, actor, now_ms)
        except NotUncertain:
            continue
        resolved += 1
    return resolved

