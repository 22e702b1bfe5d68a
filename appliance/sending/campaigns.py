"""Campaigns in the store: accepting one, expanding it into messages, reading progress.

Accepting a campaign only writes its row (the list as it is at that moment:
``last_contact_id``) and answers; the ``campaigns`` loop then creates one message per
contact in bounded units of :data:`EXPANSION_CHUNK` contacts, each unit writing its
messages and the new position (``queued_through``) together, guarded by the old
position. Killed between units, expansion resumes from the recorded position; the
``UNIQUE (campaign_id, msisdn)`` index makes a second message for the same number
impossible. A contact whose number is on the account's suppression list gets its
message created ``CANCELLED`` (error ``suppressed``): counted, never sent.

A campaign is ``RUNNING`` until all its messages exist and none is still ``QUEUED``,
``SENDING`` or ``RETRY``; then ``DONE``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import apsw

from appliance.optout.suppressions import SUPPRESSED, suppressed_count
from appliance.reports.states import FINAL_STATES
from appliance.sending.segments import Segmentation, segment

EXPANSION_CHUNK = 2000
IN_FLIGHT = ("QUEUED", "SENDING", "RETRY")


class IdempotencyConflict(ValueError):
    """The idempotency key was used before for a different campaign."""


class NoSuchList(LookupError):
    """The account has no list of that name."""


@dataclass(frozen=True)
class NewCampaign:
    account_id: int
    list_name: str
    provider: str
    body: str
    idempotency_key: str


@dataclass(frozen=True)
class Campaign:
    id: int
    account_id: int
    list_id: int
    list_name: str
    provider: str
    body: str
    state: str
    total: int
    queued_through: int
    last_contact_id: int
    created_at: int
    updated_at: int

    @property
    def expanded(self) -> bool:
        return self.queued_through >= self.last_contact_id

    @property
    def segmentation(self) -> Segmentation:
        """How the campaign's body travels (every message of it has this body)."""
        return segment(self.body)

    @property
    def parts(self) -> int:
        """SMS parts the whole campaign is billed as: messages x parts per message."""
        return self.total * self.segmentation.count


@dataclass(frozen=True)
class DryRun:
    """What a campaign would send, before anything is created (MSG-2)."""

    list_name: str
    provider: str
    messages: int
    segmentation: Segmentation
    suppressed: int = 0

    @property
    def parts(self) -> int:
        return self.messages * self.segmentation.count


def dry_run(conn: apsw.Connection, account_id: int, list_name: str, provider: str,
            body: str) -> DryRun:
    """Count what a campaign to ``list_name`` would send (a read unit; writes nothing):
    ``messages`` are the contacts that would be sent to, ``suppressed`` those on the
    account's suppression list (their messages would be created ``CANCELLED``)."""
    lst = conn.execute(
        "SELECT id FROM lists WHERE account_id = ? AND name = ? AND deleted_at IS NULL",
        (account_id, list_name),
    ).fetchone()
    if lst is None:
        raise NoSuchList(f"no list named {list_name!r}")
    list_id = int(lst[0])
    row: Any = conn.execute(
        "SELECT COUNT(*) FROM contacts WHERE list_id = ?", (list_id,)).fetchone()
    suppressed = suppressed_count(conn, account_id, list_id)
    return DryRun(list_name, provider, int(row[0]) - suppressed, segment(body), suppressed)


@dataclass
class Progress:
    campaign: Campaign
    counts: dict[str, int] = field(default_factory=dict)
    suppressed: int = 0  # CANCELLED because the number is on the suppression list

    @property
    def created(self) -> int:
        return sum(self.counts.values())

    @property
    def finalised(self) -> int:
        return sum(n for s, n in self.counts.items() if s in FINAL_STATES)

    @property
    def state(self) -> str:
        if self.campaign.state == "CANCELLED":
            return "CANCELLED"
        busy = any(self.counts.get(s, 0) for s in IN_FLIGHT)
        return "RUNNING" if busy or not self.campaign.expanded else "DONE"


COLUMNS = (
    "c.id, c.account_id, c.list_id, l.name, c.provider, c.body, c.state, c.total,"
    " c.queued_through, c.last_contact_id, c.created_at, c.updated_at"
)


def _campaign(row: Any) -> Campaign:
    return Campaign(*row)


def create_campaign(conn: apsw.Connection, new: NewCampaign,
                    now_ms: int) -> tuple[Campaign, bool]:
    """Write the campaign row (a write unit); the same key gives back the same campaign."""
    lst = conn.execute(
        "SELECT id FROM lists WHERE account_id = ? AND name = ? AND deleted_at IS NULL",
        (new.account_id, new.list_name)
    ).fetchone()
    if lst is None:
        raise NoSuchList(f"no list named {new.list_name!r}")
    list_id = int(lst[0])
    old = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? AND c.idempotency_key = ?",
        (new.account_id, new.idempotency_key),
    ).fetchone()
    if old is not None:
        found = _campaign(old)
        if (found.list_id, found.body, found.provider) != (list_id, new.body, new.provider):
            raise IdempotencyConflict(
                "this Idempotency-Key was used for a different campaign; "
                "use a new key for a new campaign"
            )
        return found, False
    row: Any = conn.execute(
        "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM contacts WHERE list_id = ?", (list_id,)
    ).fetchone()
    total, last_id = int(row[0]), int(row[1])
    conn.execute(
        "INSERT INTO campaigns (account_id, list_id, provider, body, idempotency_key, state,"
        " total, queued_through, last_contact_id, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, 'RUNNING', ?, 0, ?, ?, ?)",
        (new.account_id, list_id, new.provider, new.body, new.idempotency_key, total, last_id,
         now_ms, now_ms),
    )
    campaign_id = conn.last_insert_rowid()
    got = get_campaign(conn, campaign_id)
    assert got is not None
    return got, True


def get_campaign(conn: apsw.Connection, campaign_id: int,
                 account_id: int | None = None) -> Campaign | None:
    sql = f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id WHERE c.id = ?"
    args: tuple[int, ...] = (campaign_id,)
    if account_id is not None:
        sql += " AND c.account_id = ?"
        args = (campaign_id, account_id)
    row = conn.execute(sql, args).fetchone()
    return None if row is None else _campaign(row)


def campaign_progress(conn: apsw.Connection, campaign: Campaign) -> Progress:
    rows: list[Any] = conn.execute(
        "SELECT state, COUNT(*) FROM messages WHERE campaign_id = ? GROUP BY state",
        (campaign.id,),
    ).fetchall()
    suppressed: Any = conn.execute(
        "SELECT count(*) FROM messages WHERE campaign_id = ? AND state = 'CANCELLED'"
        " AND error = ?", (campaign.id, SUPPRESSED)).fetchone()
    return Progress(campaign, {str(s): int(n) for s, n in rows}, int(suppressed[0]))


def list_campaigns(conn: apsw.Connection, account_id: int, limit: int = 100) -> list[Progress]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? ORDER BY c.id DESC LIMIT ?",
        (account_id, limit),
    ).fetchall()
    return [campaign_progress(conn, _campaign(r)) for r in rows]


def next_to_expand(conn: apsw.Connection) -> Campaign | None:
    """The oldest campaign whose messages are not all created yet (a read unit)."""
    row = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.state = 'RUNNING' AND c.queued_through < c.last_contact_id"
        " ORDER BY c.id LIMIT 1"
    ).fetchone()
    return None if row is None else _campaign(row)


def expand_chunk(conn: apsw.Connection, campaign: Campaign, new_ref: Callable[[], str],
                 now_ms: int, chunk: int = EXPANSION_CHUNK) -> int:
    """Create the messages for the next ``chunk`` contacts (a write unit).

    Returns how many messages were created. The position moves only if it is still
    where ``campaign`` says (two expanders can never both advance it).
    """
    contacts: list[Any] = conn.execute(
        "SELECT c.id, c.msisdn, s.id IS NOT NULL FROM contacts c LEFT JOIN suppressions s"
        " ON s.account_id = ? AND s.msisdn = c.msisdn"
        " WHERE c.list_id = ? AND c.id > ? AND c.id <= ? ORDER BY c.id LIMIT ?",
        (campaign.account_id, campaign.list_id, campaign.queued_through,
         campaign.last_contact_id, chunk),
    ).fetchall()
    through = int(contacts[-1][0]) if contacts else campaign.last_contact_id
    if len(contacts) < chunk:
        through = campaign.last_contact_id
    conn.execute(
        "UPDATE campaigns SET queued_through = ?, updated_at = ?"
        " WHERE id = ? AND queued_through = ?",
        (through, now_ms, campaign.id, campaign.queued_through),
    )
    if conn.changes() != 1:
        return 0
    seg = segment(campaign.body)  # one body for the whole campaign: segmented once
    created = 0
    for _cid, msisdn, suppressed in contacts:
        # A suppressed contact's message is created CANCELLED (never sent), so the
        # campaign's counts add up to its total (OPS-4).
        conn.execute(
            "INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body, state,"
            " error, attempts, next_attempt_at, created_at, updated_at, finalised_at,"
            " encoding, parts, ucs2_because)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (campaign_id, msisdn) DO NOTHING",
            (new_ref(), campaign.account_id, campaign.id, campaign.provider, msisdn,
             campaign.body, "CANCELLED" if suppressed else "QUEUED",
             SUPPRESSED if suppressed else None, now_ms, now_ms, now_ms,
             now_ms if suppressed else None, seg.encoding, seg.count, seg.ucs2_because),
        )
        created += conn.changes()
    return created
