"""Messages as they are read: one message, its reports, its parts, its decisions.

Every function is a read unit (a function of a connection). Writing a message is
elsewhere, by concept: accepting one (:mod:`appliance.sending.accept`), claiming and
marking it (:mod:`appliance.sending.claims`), recording what the provider said
(:mod:`appliance.sending.outcomes`), settling what a crash left
(:mod:`appliance.sending.recovery`) and the operator's decisions
(:mod:`appliance.sending.resolution`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.sending.campaigns import PRIORITY_HIGH
from appliance.store.connection import Connection


@dataclass(frozen=True)
class Action:
    """A decision an operator took about a message."""

    action: str
    from_state: str
    to_state: str
    actor: str
    at: int


def message_actions(conn: Connection, message_id: int) -> list[Action]:
    rows: list[Any] = conn.execute(
        "SELECT action, from_state, to_state, actor, at FROM message_actions"
        " WHERE message_id = ? ORDER BY id", (message_id,)).fetchall()
    return [Action(*r) for r in rows]



MESSAGE_COLUMNS = (
    "id, ref, account_id, campaign_id, provider, msisdn, body, state, state_at, attempts,"
    " next_attempt_at, provider_msg_id, error, created_at, updated_at, submitted_at,"
    " finalised_at, encoding, parts, ucs2_because, priority, ucs2_parts, error_kind,"
    " expires_at, route, attempts_log"
)


@dataclass(frozen=True)
class Message:
    id: int
    ref: str
    account_id: int
    campaign_id: int | None
    provider: str
    msisdn: str
    body: str
    state: str
    state_at: int
    attempts: int
    next_attempt_at: int
    provider_msg_id: str | None
    error: str | None
    created_at: int
    updated_at: int
    submitted_at: int | None
    finalised_at: int | None
    encoding: str = "GSM-7"
    parts: int = 1
    ucs2_because: str | None = None
    priority: int = PRIORITY_HIGH
    ucs2_parts: int | None = None  # what UCS-2 would have taken; None: made before ENC-1
    error_kind: str | None = None  # "iys": a provider refused it for İYS; else None
    expires_at: int | None = None  # ROUTE-4: never sent after this; None: no validity
    route: str | None = None  # ROUTE-3: the [[routes]] prefix that chose its provider
    attempts_log: str | None = None  # ROUTE-3: appliance.sending.attempt_log


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    state: str
    reported_at: int
    received_at: int
    repeats: int
    outcome: str | None
    error_code: str | None
    part: int | None = None  # the part it was about; None: waiting, or the whole message
    source: str = "callback"  # how it came: callback, session (SMPP) or pull


@dataclass(frozen=True)
class Part:
    """One part as the provider reports on it (``message_parts``)."""

    part: int
    provider_msg_id: str | None
    state: str
    state_at: int
    error: str | None
    submitted_at: int | None
    finalised_at: int | None
    updated_at: int


def _message(row: Any) -> Message:
    return Message(*row)


def get_message(conn: Connection, ref: str, account_id: int) -> Message | None:
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE ref = ? AND account_id = ?",
        (ref, account_id),
    ).fetchone()
    return None if row is None else _message(row)


def message_history(conn: Connection, message: Message) -> list[HistoryEntry]:
    """Every report kept for the message: applied, stale, or still waiting."""
    rows: list[Any] = conn.execute(
        "SELECT status, state, reported_at, received_at, repeats, outcome, error_code, part,"
        " source FROM report_inbox WHERE (ref = ? AND provider = ?) OR message_id = ?"
        " ORDER BY received_at, id",
        (message.ref, message.provider, message.id),
    ).fetchall()
    return [HistoryEntry(*r) for r in rows]


def message_parts(conn: Connection, message_id: int) -> list[Part]:
    """The message's parts, in order (a read unit); empty before its submission."""
    rows: list[Any] = conn.execute(
        "SELECT part, provider_msg_id, state, state_at, error, submitted_at, finalised_at,"
        " updated_at FROM message_parts WHERE message_id = ? ORDER BY part", (message_id,),
    ).fetchall()
    return [Part(*r) for r in rows]


def messages_for_msisdn(conn: Connection, account_id: int, msisdn: str,
                        limit: int = 50) -> list[Message]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE account_id = ? AND msisdn = ?"
        " ORDER BY id DESC LIMIT ?",
        (account_id, msisdn, limit),
    ).fetchall()
    return [_message(r) for r in rows]


def read_message(conn: Connection, ref: str, account_id: int) -> tuple[
        Message, list[HistoryEntry], list[Part], list[Action]] | None:
    """The account's message with its reports, parts and decisions (a read unit), or
    ``None``: everything its page and its API answer show."""
    m = get_message(conn, ref, account_id)
    if m is None:
        return None
    return (m, message_history(conn, m), message_parts(conn, m.id), message_actions(conn, m.id))
