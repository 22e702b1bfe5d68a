"""Campaigns in the store: accepting one, expanding it into messages, steering it, progress.

Accepting a campaign only writes its row (the list as it is at that moment:
``last_contact_id``) and answers; the ``campaigns`` loop then creates one message per
contact in bounded units of :data:`EXPANSION_CHUNK` contacts, each unit writing its
messages and the new position (``queued_through``) together, guarded by the old
position. Killed between units, expansion resumes from the recorded position; the
``UNIQUE (campaign_id, msisdn)`` index makes a second message for the same number
impossible. A contact whose number is on the account's suppression list gets its
message created ``CANCELLED`` (error ``suppressed``): counted, never sent.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from appliance.message_text.segments import Segmentation, segment
from appliance.optout.suppressions import SUPPRESSED, suppressed_count
from appliance.reports.states import FINAL_STATES
from appliance.sending.personalise import Template, as_written, parse
from appliance.sending.windows import SendWindow, window_of
from appliance.store import dialect
from appliance.store.changes import executemany_changes
from appliance.store.connection import Connection
from appliance.store.singleton import one_at_a_time

EXPANSION_CHUNK = 2000
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


@dataclass(frozen=True)
class DryRun:
    """What a campaign would send, counted after personalisation (MSG-2, OPS-3)."""

    list_name: str
    provider: str
    messages: int
    parts: int
    suppressed: int
    longest: Segmentation  # the message with the most parts (then the most units)
    longest_text: str
    ucs2_messages: int
    ucs2_because: str | None
    personalised: bool
    contacts: int = 0
    last_contact_id: int = 0
    ucs2_parts: int = 0  # what the same messages would take in UCS-2 (ENC-1)
    turkish_messages: int = 0  # messages that go as GSM-7 Turkish

    @property
    def encoding(self) -> str:
        """UCS-2 when any message travels as UCS-2, else GSM-7 Turkish when any does."""
        if self.ucs2_messages:
            return "UCS-2"
        return "GSM-7 Turkish" if self.turkish_messages else "GSM-7"

    @property
    def segmentation(self) -> Segmentation:
        return self.longest


def _list_id(conn: Connection, account_id: int, list_name: str) -> int:
    lst = conn.execute(
        "SELECT id FROM lists WHERE account_id = ? AND name = ? AND deleted_at IS NULL",
        (account_id, list_name),
    ).fetchone()
    if lst is None:
        raise NoSuchList(f"no list named {list_name!r}")
    return int(lst[0])


def _better(seg: Segmentation, than: Segmentation | None) -> bool:
    return than is None or (seg.count, seg.units) > (than.count, than.units)


def turkish_sql(prefixes: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """A SQL truth value over ``c.msisdn``: the number takes the Turkish tables."""
    if not prefixes:
        return "0", ()
    return ("(" + " OR ".join("c.msisdn LIKE ?" for _ in prefixes) + ")",
            tuple(p + "%" for p in prefixes))


def dry_run(conn: Connection, account_id: int, list_name: str, provider: str,
            body: str, template: Template | None = None,
            turkish_prefixes: Sequence[str] = ()) -> DryRun:
    """Count what a campaign to ``list_name`` would send (a read unit; writes nothing).

    ``messages`` are the contacts that would be sent to, ``suppressed`` those on the
    account's suppression list (their messages would be created ``CANCELLED``), and
    ``parts`` the SMS parts of the texts as each contact would get it. A personalised
    body is rendered once per distinct name (the text depends on nothing else).
    ``turkish_prefixes``: the numbers the provider sends the Turkish tables to (ENC-1).
    """
    template = template or parse(body)
    list_id = _list_id(conn, account_id, list_name)
    row: Any = conn.execute(
        "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM contacts WHERE list_id = ?",
        (list_id,)).fetchone()
    contacts, last_id = int(row[0]), int(row[1])
    suppressed = suppressed_count(conn, account_id, list_id)
    static = segment(template.render(None))
    if not template.personalised and not turkish_prefixes:
        sent = contacts - suppressed
        return DryRun(list_name, provider, sent, sent * static.count, suppressed, static,
                      template.render(None), sent if static.encoding == "UCS-2" else 0,
                      static.ucs2_because, False, contacts, last_id, sent * static.ucs2_parts)
    name_sql = "c.name" if template.personalised else "NULL"
    turkish, args = turkish_sql(turkish_prefixes)
    groups: list[Any] = conn.execute(
        f"SELECT {name_sql}, {turkish}, count(*) FROM contacts c WHERE c.list_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.account_id = ?"
        " AND s.msisdn = c.msisdn) GROUP BY 1, 2", (*args, list_id, account_id)).fetchall()
    messages = parts = ucs2 = ucs2_parts = in_turkish = 0
    longest: Segmentation | None = None
    longest_text = template.render(None)
    because: str | None = None  # from the largest group of UCS-2 messages
    because_count = 0
    seen: dict[tuple[str, bool], Segmentation] = {}
    for name, to_turkey, count in groups:
        text = template.render(None if name is None else str(name))
        key = (text, bool(to_turkey))
        seg = seen.get(key)
        if seg is None:
            seg = seen[key] = segment(text, key[1])
        n = int(count)
        messages += n
        parts += n * seg.count
        ucs2_parts += n * seg.ucs2_parts
        if seg.encoding == "GSM-7 Turkish":
            in_turkish += n
        if seg.encoding == "UCS-2":
            ucs2 += n
            if n > because_count:
                because, because_count = seg.ucs2_because, n
        if _better(seg, longest):
            longest, longest_text = seg, text
    return DryRun(list_name, provider, messages, parts, suppressed, longest or static,
                  longest_text, ucs2, because, template.personalised, contacts, last_id,
                  ucs2_parts, in_turkish)


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
    " c.window_from, c.window_to, c.window_tz, c.personalised, c.planned_parts"
)


def _campaign(row: Any) -> Campaign:
    return Campaign(*row)


def create_campaign(conn: Connection, new: NewCampaign, now_ms: int,
                    through_contact_id: int | None = None) -> tuple[Campaign, bool]:
    """Write the campaign row (a write unit); the same key gives back the same campaign.

    The campaign is the list's contacts up to ``through_contact_id`` (the list as its
    dry run counted it) or, without one, as it is now. The body must parse as a
    template (the caller checked it).
    """
    list_id = _list_id(conn, new.account_id, new.list_name)
    # The same key at two processes at once: the second waits for the first's unit.
    one_at_a_time(conn, f"idempotency:campaigns:{new.account_id}:{new.idempotency_key}")
    old = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? AND c.idempotency_key = ?",
        (new.account_id, new.idempotency_key),
    ).fetchone()
    if old is not None:
        found = _campaign(old)
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
        " window_from, window_to, window_tz, personalised, planned_parts)"
        " VALUES (?, ?, ?, ?, ?, 'RUNNING', ?, 0, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
        (new.account_id, list_id, new.provider, new.body, new.idempotency_key, total, last_id,
         now_ms, now_ms, new.send_at, w.start if w else None, w.end if w else None,
         w.tz if w else None, new.planned_parts),
    )
    campaign_id = conn.last_insert_rowid()
    got = get_campaign(conn, campaign_id)
    assert got is not None
    return got, True


def get_campaign(conn: Connection, campaign_id: int,
                 account_id: int | None = None) -> Campaign | None:
    sql = f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id WHERE c.id = ?"
    args: tuple[int, ...] = (campaign_id,)
    if account_id is not None:
        sql += " AND c.account_id = ?"
        args = (campaign_id, account_id)
    row = conn.execute(sql, args).fetchone()
    return None if row is None else _campaign(row)


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
    suppressed: Any = conn.execute(
        "SELECT count(*) FROM messages WHERE campaign_id = ? AND state = 'CANCELLED'"
        " AND error = ?", (campaign.id, SUPPRESSED)).fetchone()
    parts = sum(int(r[2] or 0) for r in rows if r[0] != "CANCELLED")
    if not campaign.expanded and campaign.state != CANCELLED:
        parts = max(parts, campaign.parts)  # not all created yet: the dry run's count
    most = max((int(r[3] or 0) for r in rows), default=0)
    if not campaign.expanded and campaign.state != CANCELLED:
        ucs2_parts = max(ucs2_parts, campaign.total * campaign.segmentation.ucs2_parts)
    return Progress(campaign, {str(r[0]): int(r[1]) for r in rows}, int(suppressed[0]),
                    parts, most, now_ms, encodings, ucs2_parts if ucs2_known else None)


def list_campaigns(conn: Connection, account_id: int, limit: int = 100,
                   now_ms: int = 0) -> list[Progress]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? ORDER BY c.id DESC LIMIT ?",
        (account_id, limit),
    ).fetchall()
    return [campaign_progress(conn, _campaign(r), now_ms) for r in rows]


def next_to_expand(conn: Connection) -> Campaign | None:
    """The oldest campaign whose messages are not all created yet (a read unit).

    A paused or scheduled campaign is expanded too (the sender does not claim its
    messages); a cancelled one is not.
    """
    row = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.state IN ('RUNNING', 'PAUSED') AND c.queued_through < c.last_contact_id"
        " ORDER BY c.id LIMIT 1"
    ).fetchone()
    return None if row is None else _campaign(row)


def expand_chunk(conn: Connection, campaign: Campaign, new_ref: Callable[[], str],
                 now_ms: int, chunk: int = EXPANSION_CHUNK, max_parts: int = 0,
                 turkish_prefixes: Sequence[str] = ()) -> int:
    """Create the messages for the next ``chunk`` contacts (a write unit).

    Returns how many messages were created. The position moves only if it is still
    where ``campaign`` says and the campaign is not cancelled (two expanders can never
    both advance it, and a cancel stops it). Each message carries the text rendered
    for its contact; one whose text needs more than ``max_parts`` parts (when given) is
    created ``REJECTED``, never sent. Messages are due at ``send_at`` at the earliest.
    """
    contacts: list[Any] = conn.execute(
        "SELECT c.id, c.msisdn, c.name, s.id IS NOT NULL FROM contacts c"
        " LEFT JOIN suppressions s ON s.account_id = ? AND s.msisdn = c.msisdn"
        " WHERE c.list_id = ? AND c.id > ? AND c.id <= ? ORDER BY c.id LIMIT ?",
        (campaign.account_id, campaign.list_id, campaign.queued_through,
         campaign.last_contact_id, chunk),
    ).fetchall()
    through = int(contacts[-1][0]) if contacts else campaign.last_contact_id
    if len(contacts) < chunk:
        through = campaign.last_contact_id
    conn.execute(
        "UPDATE campaigns SET queued_through = ?, updated_at = ?"
        " WHERE id = ? AND queued_through = ? AND state <> 'CANCELLED'",
        (through, now_ms, campaign.id, campaign.queued_through),
    )
    if conn.changes() != 1:
        return 0
    template = campaign.template
    due = max(now_ms, campaign.send_at or 0)
    segs: dict[tuple[str, bool], Segmentation] = {}
    rows: list[tuple[Any, ...]] = []
    for _cid, msisdn, name, suppressed in contacts:
        text = template.render(None if name is None else str(name))
        key = (text, any(str(msisdn).startswith(p) for p in turkish_prefixes))
        seg = segs.get(key)
        if seg is None:
            seg = segs[key] = segment(*key)
        # A suppressed contact's message is created CANCELLED (never sent), so the
        # campaign's counts add up to its total (OPS-4).
        state, error = ("CANCELLED", SUPPRESSED) if suppressed else ("QUEUED", None)
        if not suppressed and max_parts and seg.count > max_parts:
            state, error = "REJECTED", (f"the personalised text needs {seg.count} parts,"
                                        f" more than the provider's max_parts ({max_parts})")
        rows.append((new_ref(), campaign.account_id, campaign.id, campaign.provider, msisdn,
                     text, state, error, due, now_ms, now_ms,
                     now_ms if state != "QUEUED" else None, seg.encoding, seg.count,
                     seg.ucs2_because, PRIORITY_NORMAL, seg.ucs2_parts))
    return executemany_changes(
        conn, "INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body,"
        " state, error, attempts, next_attempt_at, created_at, updated_at, finalised_at,"
        " encoding, parts, ucs2_because, priority, ucs2_parts)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (campaign_id, msisdn) DO NOTHING", rows)


# -- steering (OPS-2) ----------------------------------------------------------------

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


def sendable_campaigns(conn: Connection, ids: list[int]) -> dict[int, Campaign]:
    """These campaigns' rows, by id (a read inside the claim)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows: list[Any] = conn.execute(
        f"SELECT {COLUMNS} FROM campaigns c JOIN lists l ON l.id = c.list_id"
        f" WHERE c.id IN ({marks})", tuple(ids)).fetchall()
    return {int(r[0]): _campaign(r) for r in rows}
