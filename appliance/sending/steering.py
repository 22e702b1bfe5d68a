"""Steering a campaign (OPS-2): pause, resume, cancel, each one write unit.

A pause releases what the sender had reserved of the campaign; a cancel makes every
message not yet sent ``CANCELLED`` and stops the expansion. Each unit takes the
campaign as the last unit left it (locked on PostgreSQL), so two steering requests at
two processes are taken one after the other.
"""

from __future__ import annotations

from appliance.sending.campaigns import (
    CANCELLED,
    CANCELLED_BY_OPERATOR,
    DONE,
    PAUSED,
    RUNNING,
    Campaign,
    NoSuchCampaign,
    NotAllowed,
    get_campaign,
)
from appliance.store import dialect
from appliance.store.connection import Connection


def _owned(conn: Connection, campaign_id: int, account_id: int) -> Campaign:
    """The campaign a steering unit is about, locked to the unit's end on PostgreSQL and
    read as the last unit left it: a pause and a cancel sent to two processes at once
    are taken one after the other, and the second judges the first's outcome (a
    cancelled campaign is never paused back into life)."""
    lock = dialect.of(conn).for_update
    if lock:
        conn.execute(f"SELECT id FROM campaigns WHERE id = ?{lock}", (campaign_id,))
    found = get_campaign(conn, campaign_id, account_id)
    if found is None:
        raise NoSuchCampaign("no such campaign")
    return found


def _has_unsent(conn: Connection, campaign: Campaign) -> bool:
    if not campaign.expanded:
        return True
    row = conn.execute(
        "SELECT 1 FROM messages WHERE campaign_id = ? AND state IN ('QUEUED', 'SENDING',"
        " 'RETRY') LIMIT 1", (campaign.id,)).fetchone()
    return row is not None


def release_claimed_sql(campaign: bool) -> str:
    """Give back what the sender reserved (of one campaign, or of a provider)."""
    where = " AND campaign_id = ?" if campaign else ""
    return ("UPDATE messages SET claimed_at = NULL WHERE claimed_at IS NOT NULL"
            f" AND provider = ?{where}")


def pause_campaign(conn: Connection, campaign_id: int, account_id: int,
                   now_ms: int) -> Campaign:
    """Pause (a write unit): nothing more of it is claimed, and what the sender had
    reserved is given back, so from this commit on none of its messages starts to be
    sent. Pausing a paused campaign changes nothing."""
    found = _owned(conn, campaign_id, account_id)
    if found.state == CANCELLED:
        raise NotAllowed("the campaign is cancelled", CANCELLED)
    if found.state == RUNNING:
        if not _has_unsent(conn, found):
            raise NotAllowed("the campaign has nothing left to send", DONE)
        conn.execute("UPDATE campaigns SET state = 'PAUSED', updated_at = ? WHERE id = ?",
                     (now_ms, found.id))
        conn.execute(release_claimed_sql(True), (found.provider, found.id))
    got = get_campaign(conn, found.id)
    assert got is not None
    return got


def resume_campaign(conn: Connection, campaign_id: int, account_id: int,
                    now_ms: int) -> Campaign:
    """Resume a paused campaign (a write unit); a running one is left as it is."""
    found = _owned(conn, campaign_id, account_id)
    if found.state == CANCELLED:
        raise NotAllowed("the campaign is cancelled", CANCELLED)
    if found.state == PAUSED:
        conn.execute("UPDATE campaigns SET state = 'RUNNING', updated_at = ? WHERE id = ?",
                     (now_ms, found.id))
    got = get_campaign(conn, found.id)
    assert got is not None
    return got


def cancel_campaign(conn: Connection, campaign_id: int, account_id: int,
                    now_ms: int) -> tuple[Campaign, int]:
    """Cancel (a write unit): every message not yet sent (``QUEUED``, ``RETRY``, reserved
    or not) becomes ``CANCELLED``, final and never sent, and no more are created.
    Messages already sent keep their state and their reports. Returns the campaign and
    how many messages this cancelled."""
    found = _owned(conn, campaign_id, account_id)
    if found.state == CANCELLED:
        return found, 0
    if not _has_unsent(conn, found):
        raise NotAllowed("the campaign has nothing left to send", DONE)
    conn.execute("UPDATE campaigns SET state = 'CANCELLED', updated_at = ? WHERE id = ?",
                 (now_ms, found.id))
    conn.execute(
        "UPDATE messages SET state = 'CANCELLED', error = ?, claimed_at = NULL,"
        " updated_at = ?, finalised_at = COALESCE(finalised_at, ?)"
        " WHERE campaign_id = ? AND state IN ('QUEUED', 'RETRY') AND NOT EXISTS"
        " (SELECT 1 FROM message_parts p WHERE p.message_id = messages.id"
        " AND p.state <> 'RETRY')",  # a message some part of which went out is not
        (CANCELLED_BY_OPERATOR, now_ms, now_ms, found.id))  # 'never sent': it goes on
    cancelled = conn.changes()
    got = get_campaign(conn, found.id)
    assert got is not None
    return got, cancelled
