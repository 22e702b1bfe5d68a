"""Campaigns in the store: the campaign, accepting one, and its progress.

Accepting a campaign only writes its row (the list as it is at that moment:
``last_contact_id``) and answers; the ``campaigns`` loop then creates its messages
(:mod:`appliance.sending.campaign_messages`). What it would send is counted first by
:mod:`appliance.sending.dry_run`; it is steered by :mod:`appliance.sending.steering`.

The body is a template (:mod:`appliance.sending.personalise`): each message gets the
text rendered for its contact, and its own encoding and parts (OPS-3).

Steering (OPS-2): the stored ``state`` is ``RUNNING``, ``PAUSED`` or ``CANCELLED``; a
running campaign whose ``send_at`` has not come is shown ``SCHEDULED``, and one with
nothing left to send and no ``UNCERTAIN`` message ``DONE``. The sender claims a
campaign's messages only while it is ``RUNNING``, its ``send_at`` has passed and its
window is open (:func:`sendable`). A pause releases what the sender had reserved of
it; a cancel makes every message not yet sent ``CANCELLED`` and stops the expansion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from appliance.message_text.segments import Segmentation, segment
from appliance.optout.consents import NO_CONSENT
from appliance.optout.suppressions import SUPPRESSED
from appliance.providers.iys import IYS_ERROR
from appliance.reports.states import FINAL_STATES
from appliance.sending.duplicates import DUPLICATE_TODAY
from appliance.sending.personalise import Template, as_written, parse
from appliance.sending.validity import EXPIRED_BEFORE_SENDING
from appliance.sending.windows import SendWindow, window_of
from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.store.singleton import one_at_a_time

# Messages still to be sent (or being sent): a campaign with any is not done.
UNSENT = ("QUEUED", "SENDING", "RETRY")
IN_FLIGHT = UNSENT  # the name this module's readers knew it by
RUNNING, PAUSED, CANCELLED = "RUNNING", "PAUSED", "CANCELLED"
SCHEDULED, DONE = "SCHEDULED", "DONE"
CANCELLED_BY_OPERATOR = "cancelled by the operator"
PRIORITY_HIGH, PRIORITY_NORMAL = 0, 1
PRIORITIES = {"high": PRIORITY_HIGH, "normal": PRIORITY_NORMAL}
PRIORITY_NAMES = {v: k for k, v in PRIORITIES.items()}


class IdempotencyConflict(ValueError):
    """The idempotency key was used before for a different campaign."""


class NoSuchList(LookupError):
    """The account has no list of that name."""


class NoSuchCampaign(LookupError):
    """The account has no such campaign."""


class ListChanged(Exception):
    """The list does not hold the number of contacts the confirmation stated."""

    def __init__(self, contacts: int) -> None:
        super().__init__(f"the list now has {contacts} contacts")
        self.contacts = contacts


class NotAllowed(ValueError):
    """The campaign is in a state that does not allow this (``state`` is the shown one)."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


@dataclass(frozen=True)
class NewCampaign:
    account_id: int
    list_name: str
    provider: str
    body: str
    idempotency_key: str
    send_at: int | None = None
    window: SendWindow | None = None
    planned_parts: int = 0
    message_type: str | None = None  # IYS-1
    validity_s: int = 0  # ROUTE-4: each message's, from its due time; 0: the provider's
    routed: bool = False  # ROUTE-3: its messages follow [[routes]] (no provider named)


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
    send_at: int | None = None
    window_from: int | None = None
    window_to: int | None = None
    window_tz: str | None = None
    personalised: int = 0
    planned_parts: int = 0
    message_type: str | None = None  # IYS-1: commercial or transactional
    validity_s: int | None = None  # ROUTE-4: its messages'; None or 0: the provider's own
    routed: int = 0  # ROUTE-3: 1: each message goes where [[routes]] send its number
    queued_after: str | None = None  # the last number whose message exists; None: none yet

    @property
    def expanded(self) -> bool:
        return self.queued_through >= self.last_contact_id

    @property
    def template(self) -> Template:
        return parse(self.body) if self.personalised else as_written(self.body)

    @property
    def window(self) -> SendWindow | None:
        return window_of(self.window_from, self.window_to, self.window_tz)

    @property
    def segmentation(self) -> Segmentation:
        """How the text travels without a contact's name (every message, when the
        body has no placeholder)."""
        return segment(self.template.render(None))

    @property
    def parts(self) -> int:
        """SMS parts planned at acceptance (the dry run's count)."""
        return self.planned_parts or self.total * self.segmentation.count

    def sendable(self, now_ms: int) -> bool:
        return sendable(self.state, self.send_at, self.window, now_ms)


def sendable(state: str, send_at: int | None, window: SendWindow | None, now_ms: int) -> bool:
    """May the sender claim this campaign's messages now?"""
    if state != RUNNING or (send_at is not None and now_ms < send_at):
        return False
    return window is None or window.is_open(now_ms)



def list_id_of(conn: Connection, account_id: int, list_name: str) -> int:
    lst = conn.execute(
        "SELECT id FROM lists WHERE account_id = ? AND name = ? AND deleted_at IS NULL",
        (account_id, list_name),
    ).fetchone()
    if lst is None:
        raise NoSuchList(f"no list named {list_name!r}")
    return as_int(lst[0])



@dataclass
class Progress:
    campaign: Campaign
    counts: dict[str, int] = field(default_factory=dict)
    suppressed: int = 0  # CANCELLED because the number is on the suppression list
    parts: int = 0  # SMS parts of its messages (not cancelled); the plan until all exist
    max_parts: int = 0  # the most parts any of its messages has
    now_ms: int = 0
    encodings: dict[str, int] = field(default_factory=dict)  # messages (not cancelled)
    ucs2_parts: int | None = None  # what they would take in UCS-2; None: not known
    no_consent: int = 0  # CANCELLED: a commercial message to a number without consent
    duplicate_today: int = 0  # CANCELLED: the same text went to the number today (IYS-4)
    iys_refused: int = 0  # REJECTED by a provider for İYS (error_kind "iys")
    expired: int = 0  # CANCELLED: its validity ran out before it was sent (ROUTE-4)

    @property
    def encoding(self) -> str:
        """UCS-2 when any message goes as UCS-2, else GSM-7 Turkish when any does."""
        for name in ("UCS-2", "GSM-7 Turkish"):
            if self.encodings.get(name):
                return name
        return "GSM-7" if self.encodings else self.campaign.segmentation.encoding

    @property
    def created(self) -> int:
        return sum(self.counts.values())

    @property
    def finalised(self) -> int:
        return sum(n for s, n in self.counts.items() if s in FINAL_STATES)

    @property
    def unsent(self) -> int:
        """Messages still to go out, counting those not created yet."""
        waiting = sum(self.counts.get(s, 0) for s in UNSENT)
        if self.campaign.state == CANCELLED:
            return waiting
        return waiting + max(0, self.campaign.total - self.created)

    @property
    def uncertain(self) -> int:
        return self.counts.get("UNCERTAIN", 0)

    @property
    def cancelled(self) -> int:
        """Messages cancelled, and contacts a cancel left without a message."""
        never = self.campaign.total - self.created if self.campaign.state == CANCELLED else 0
        return self.counts.get("CANCELLED", 0) + max(0, never)

    @property
    def state(self) -> str:
        c = self.campaign
        if c.state in (CANCELLED, PAUSED):
            return c.state
        if self.unsent:
            return SCHEDULED if c.send_at is not None and self.now_ms < c.send_at else RUNNING
        # Nothing left to send: done, unless someone must still decide about the
        # messages that may or may not have reached the provider (OPS-6).
        return RUNNING if self.uncertain else DONE


COLUMNS = (
    "c.id, c.account_id, c.list_id, l.name, c.provider, c.body, c.state, c.total,"
    " c.queued_through, c.last_contact_id, c.created_at, c.updated_at, c.send_at,"
    " c.window_from, c.window_to, c.window_tz, c.personalised, c.planned_parts,"
    " c.message_type, c.validity_s, c.routed, c.queued_after"
)


def campaign_of_row(row: Any) -> Campaign:
    return Campaign(*row)


def create_campaign(conn: Connection, new: NewCampaign, now_ms: int,
                    through_contact_id: int | None = None) -> tuple[Campaign, bool]:
    """Write the campaign row (a write unit); the same key gives back the same campaign.

    The campaign is the list's contacts up to ``through_contact_id`` (the list as its
    dry run counted it) or, without one, as it is now. The body must parse as a
    template (the caller checked it).
    """
    list_id = list_id_of(conn, new.account_id, new.list_name)
    # The same key at two processes at once: the second waits for the first's unit.
    one_at_a_time(conn, f"idempotency:campaigns:{new.account_id}:{new.idempotency_key}")
    old = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? AND c.idempotency_key = ?",
        (new.account_id, new.idempotency_key),
    ).fetchone()
    if old is not None:
        found = campaign_of_row(old)
        if (found.list_id, found.body, found.provider, found.send_at, found.window) != (
                list_id, new.body, new.provider, new.send_at, new.window):
            raise IdempotencyConflict(
                "this Idempotency-Key was used for a different campaign; "
                "use a new key for a new campaign"
            )
        return found, False
    through = 2**62 if through_contact_id is None else through_contact_id
    # Ids are not in commit order across processes: wait for the list's chunks being
    # committed elsewhere, so that "up to the largest id" is the list as it is.
    one_at_a_time(conn, f"list:{list_id}")
    row: Any = conn.execute(
        "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM contacts WHERE list_id = ? AND id <= ?",
        (list_id, through)).fetchone()
    total, last_id = int(row[0]), int(row[1])
    w = new.window
    conn.execute(
        "INSERT INTO campaigns (account_id, list_id, provider, body, idempotency_key, state,"
        " total, queued_through, last_contact_id, created_at, updated_at, send_at,"
        " window_from, window_to, window_tz, personalised, planned_parts, message_type,"
        " validity_s, routed)"
        " VALUES (?, ?, ?, ?, ?, 'RUNNING', ?, 0, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
        (new.account_id, list_id, new.provider, new.body, new.idempotency_key, total, last_id,
         now_ms, now_ms, new.send_at, w.start if w else None, w.end if w else None,
         w.tz if w else None, new.planned_parts, new.message_type, new.validity_s or None,
         1 if new.routed else 0),
    )
    campaign_id = conn.last_insert_rowid()
    got = get_campaign(conn, campaign_id)
    assert got is not None
    return got, True


def create_confirmed_campaign(conn: Connection, new: NewCampaign, now_ms: int,
                              expected_contacts: int) -> tuple[Campaign, bool]:
    """Write the campaign a confirmation page stated (a write unit): the list must still
    hold ``expected_contacts``, else :class:`ListChanged` and nothing is written. The
    same key gives back the campaign it made, whatever the list holds now (the
    confirmation was posted twice)."""
    made = conn.execute("SELECT 1 FROM campaigns WHERE account_id = ? AND idempotency_key = ?",
                        (new.account_id, new.idempotency_key)).fetchone()
    if made is None:
        list_id = list_id_of(conn, new.account_id, new.list_name)
        row: Any = conn.execute("SELECT count(*) FROM contacts WHERE list_id = ?",
                                (list_id,)).fetchone()
        if int(row[0]) != expected_contacts:
            raise ListChanged(int(row[0]))
    return create_campaign(conn, new, now_ms)


def get_campaign(conn: Connection, campaign_id: int,
                 account_id: int | None = None) -> Campaign | None:
    sql = f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id WHERE c.id = ?"
    args: tuple[int, ...] = (campaign_id,)
    if account_id is not None:
        sql += " AND c.account_id = ?"
        args = (campaign_id, account_id)
    row = conn.execute(sql, args).fetchone()
    return None if row is None else campaign_of_row(row)


def campaign_progress(conn: Connection, campaign: Campaign, now_ms: int = 0) -> Progress:
    """Counts, parts and the state shown, from one pass over the campaign's index."""
    by_encoding: list[Any] = conn.execute(
        "SELECT state, COUNT(*), SUM(parts), MAX(parts), encoding, SUM(ucs2_parts),"
        " COUNT(ucs2_parts) FROM messages WHERE campaign_id = ? GROUP BY state, encoding",
        (campaign.id,),
    ).fetchall()
    merged: dict[str, list[int]] = {}
    encodings: dict[str, int] = {}
    ucs2_parts, ucs2_known = 0, True
    for r in by_encoding:
        m = merged.setdefault(str(r[0]), [0, 0, 0])
        m[0] += int(r[1])
        m[1] += int(r[2] or 0)
        m[2] = max(m[2], int(r[3] or 0))
        if r[0] != "CANCELLED":
            encodings[str(r[4])] = encodings.get(str(r[4]), 0) + int(r[1])
            ucs2_parts += int(r[5] or 0)
            ucs2_known = ucs2_known and int(r[6]) == int(r[1])
    rows: list[Any] = [(state, *m) for state, m in merged.items()]
    # Why messages were left out (CANCELLED: suppressed, no consent, sent today) and how
    # many a provider refused for İYS (REJECTED, error_kind "iys"), in one pass.
    why: dict[str, int] = {str(r[0]): as_int(r[1]) for r in conn.execute(
        "SELECT CASE WHEN state = 'REJECTED' THEN error_kind ELSE error END, count(*)"
        " FROM messages WHERE campaign_id = ? AND ((state = 'CANCELLED' AND error IN"
        " (?, ?, ?, ?)) OR (state = 'REJECTED' AND error_kind = ?)) GROUP BY 1",
        (campaign.id, SUPPRESSED, NO_CONSENT, DUPLICATE_TODAY, EXPIRED_BEFORE_SENDING,
         IYS_ERROR))}
    parts = sum(int(r[2] or 0) for r in rows if r[0] != "CANCELLED")
    if not campaign.expanded and campaign.state != CANCELLED:
        parts = max(parts, campaign.parts)  # not all created yet: the dry run's count
    most = max((int(r[3] or 0) for r in rows), default=0)
    if not campaign.expanded and campaign.state != CANCELLED:
        ucs2_parts = max(ucs2_parts, campaign.total * campaign.segmentation.ucs2_parts)
    return Progress(campaign, {str(r[0]): int(r[1]) for r in rows}, why.get(SUPPRESSED, 0),
                    parts, most, now_ms, encodings, ucs2_parts if ucs2_known else None,
                    why.get(NO_CONSENT, 0), why.get(DUPLICATE_TODAY, 0), why.get(IYS_ERROR, 0),
                    why.get(EXPIRED_BEFORE_SENDING, 0))


def list_campaigns(conn: Connection, account_id: int, limit: int = 100,
                   now_ms: int = 0) -> list[Progress]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? ORDER BY c.id DESC LIMIT ?",
        (account_id, limit),
    ).fetchall()
    return [campaign_progress(conn, campaign_of_row(r), now_ms) for r in rows]



def sendable_campaigns(conn: Connection, ids: list[int]) -> dict[int, Campaign]:
    """These campaigns' rows, by id (a read inside the claim)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows: list[Any] = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        f" WHERE c.id IN ({marks})", tuple(ids)).fetchall()
    return {int(r[0]): campaign_of_row(r) for r in rows}
