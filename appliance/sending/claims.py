"""Claims: which due messages the sender takes next, and the mark just before sending.

A message is committed ``QUEUED`` when accepted; the sender's claim reserves due ones
(``claimed_at``, the state stays ``QUEUED``/``RETRY``: nothing is sent yet, and a crash
gives them back), and each becomes ``SENDING`` in a small group-committed unit just
before the transport takes it (:func:`mark_sending`), so the messages a crash leaves
``SENDING`` are only those that may really have reached the provider (DLR-1, OPS-6).

Claims go by lanes (OPS-1): high-priority messages first, then single messages of
normal priority and each sendable campaign, round robin (:func:`claim_due`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from appliance.optout.suppressions import IS_SUPPRESSED_SQL, SUPPRESSED
from appliance.sending.campaigns import PRIORITY_HIGH, PRIORITY_NORMAL, sendable_campaigns
from appliance.sending.commercial import COMMERCIAL
from appliance.sending.consent_gate import note_sent, refused_now
from appliance.sending.steering import release_claimed_sql
from appliance.sending.validity import EXPIRED_BEFORE_SENDING, EXPIRED_SQL, cancel_expired
from appliance.sending.windows import SendWindow
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.owner import OWNER, dead_owners
from appliance.store.rows import as_int

RESENDABLE = ("QUEUED", "RETRY")
# A part row in this state is not taken yet: the next attempt sends it.
PART_TO_SEND = "RETRY"
_IN_CHUNK = 500
CLAIM_ROUNDS = 4  # claims per unit when whole batches turn out suppressed
# A reservation older than this is given back by the orphan sweep (PostgreSQL).
RESERVATION_TTL_MS = 60_000


@dataclass(frozen=True)
class Claimed:
    """A message claimed for one submission attempt: reserved by :func:`claim_due`,
    ``SENDING`` once :func:`mark_sending` took it (``attempts`` then counts this one).

    ``known_parts`` are ``(part, state)`` of the part rows an earlier attempt left
    (empty on a first attempt): parts in ``RETRY`` are sent by this attempt, the others
    (:attr:`skip_parts`) the provider has or may have, and are never sent again.
    ``window`` is its campaign's sending window, checked again just before sending.
    """

    id: int
    ref: str
    msisdn: str
    body: str
    attempts: int
    parts: int = 1
    known_parts: tuple[tuple[int, str], ...] = ()
    campaign_id: int | None = None
    priority: int = PRIORITY_HIGH
    window: SendWindow | None = None
    encoding: str = "GSM-7"  # as accepted (ENC-1): the transport sends it so
    # IYS-2: commercial or transactional (None: not stated), and for a commercial one the
    # recipient type of its number's consent record in force (None: no record).
    message_type: str | None = None
    recipient_type: str | None = None
    expires_at: int | None = None  # ROUTE-4: past this it is never sent (validity.py)

    @property
    def skip_parts(self) -> frozenset[int]:
        return frozenset(p for p, s in self.known_parts if s != PART_TO_SEND)

    @property
    def parts_to_send(self) -> tuple[int, ...]:
        """Parts an earlier attempt left to send (empty: the whole message)."""
        return tuple(p for p, s in self.known_parts if s == PART_TO_SEND)



# The recipient type (BIREYSEL, TACIR) a commercial message goes with to the providers
# that take it (appliance.providers.iys): its number's consent record in force, read
# here, in the claim's own select of the reserved rows (one statement for up to 500
# messages, an index probe of consents' (account_id, msisdn) key for each commercial one)
# rather than stored at acceptance: a record updated since (TACIR found to be an
# individual) goes with the message, and the claim groups messages into requests by it
# (ProviderLane.take_like). A RET committed after the claim still stops the message at
# its mark (consent_gate); a change of type between the claim and the mark (under a
# second) goes with the type read here.
RECIPIENT_TYPE_SQL = (f"CASE WHEN message_type = '{COMMERCIAL}' THEN (SELECT k.recipient_type"
                      " FROM consents k WHERE k.account_id = messages.account_id"
                      " AND k.msisdn = messages.msisdn) END")


def in_chunks(values: list[int]) -> Iterable[list[int]]:
    """``values`` in slices short enough for one ``IN (...)`` list."""
    for start in range(0, len(values), _IN_CHUNK):
        yield values[start:start + _IN_CHUNK]


def known_parts(conn: Connection, ids: list[int]) -> dict[int, list[tuple[int, str]]]:
    """``(part, state)`` of the part rows of these messages, by message id."""
    out: dict[int, list[tuple[int, str]]] = {}
    for chunk in in_chunks(ids):
        marks = ",".join("?" * len(chunk))
        for message_id, part, state in conn.execute(
                "SELECT message_id, part, state FROM message_parts"
                f" WHERE message_id IN ({marks}) ORDER BY message_id, part", tuple(chunk)):
            out.setdefault(as_int(message_id), []).append((as_int(part), str(state)))
    return out


# Every lane query repeats the partial index's condition (messages_lanes) and, on
# SQLite, names the index: an in-order range scan of the one lane. Left to choose
# without statistics, SQLite reads messages_due instead, in next_attempt_at order over
# every lane, so a campaign queued after another one's backlog had its claim walk that
# whole backlog first (33 ms a claim of 200 behind two campaigns of 100,000, not 4).
_WAITING = "state IN ('QUEUED', 'RETRY') AND claimed_at IS NULL"


@dataclass(frozen=True)
class Lane:
    """Messages claimed in turn: single messages of one priority, or one campaign."""

    priority: int
    campaign_id: int | None


HIGH_LANE = Lane(PRIORITY_HIGH, None)
NORMAL_SINGLES = Lane(PRIORITY_NORMAL, None)


def _reserve(conn: Connection, provider: str, lane: Lane, now_ms: int, stamp: int,
             limit: int) -> list[int]:
    """Reserve up to ``limit`` due messages of one lane: ``RETRY`` first, then
    ``QUEUED``, each oldest first (a write unit's part). On PostgreSQL the rows another
    process is reserving are passed over (``SKIP LOCKED``)."""
    ids: list[int] = []
    lanes = dialect.of(conn).indexed_by("messages_lanes")
    camp = "campaign_id IS NULL" if lane.campaign_id is None else "campaign_id = ?"
    lane_args: tuple[Any, ...] = () if lane.campaign_id is None else (lane.campaign_id,)
    for state in ("RETRY", "QUEUED"):
        if len(ids) >= limit:
            break
        ids += [as_int(r[0]) for r in conn.execute(
            f"SELECT id FROM messages{lanes} WHERE {_WAITING} AND state = ? AND provider = ?"
            f" AND priority = ? AND {camp} AND next_attempt_at <= ?"
            f" ORDER BY next_attempt_at LIMIT ?{dialect.of(conn).skip_locked}",
            (state, provider, lane.priority, *lane_args, now_ms, limit - len(ids)))]
    for chunk in in_chunks(ids):
        conn.execute(f"UPDATE messages{dialect.of(conn).by_rowid} SET claimed_at = ?,"
                     " lease_owner = ? WHERE id IN"
                     f" ({','.join('?' * len(chunk))})", (stamp, OWNER, *chunk))
    return ids


def campaigns_waiting(conn: Connection, provider: str) -> list[int]:
    """Campaigns of ``provider`` with messages waiting to be claimed: one index seek per
    campaign (a skip over ``messages_lanes``), whatever their backlog."""
    found: list[int] = []
    last = 0
    while True:
        row = conn.execute(
            f"SELECT campaign_id FROM messages WHERE {_WAITING} AND provider = ?"
            " AND priority = ? AND campaign_id > ? ORDER BY campaign_id LIMIT 1",
            (provider, PRIORITY_NORMAL, last)).fetchone()
        if row is None:
            return found
        last = as_int(row[0])
        found.append(last)


def _fair_shares(conn: Connection, provider: str, lanes: list[Lane], now_ms: int,
                 stamp: int, room: int) -> dict[Lane, list[int]]:
    """Split ``room`` between ``lanes`` evenly (the first lanes get the remainder); what
    a lane cannot use goes to the others."""
    got: dict[Lane, list[int]] = {lane: [] for lane in lanes}
    active = list(lanes)
    while room > 0 and active:
        share, extra = divmod(room, len(active))
        still: list[Lane] = []
        for i, lane in enumerate(active):
            want = share + (1 if i < extra else 0)
            if want == 0:
                still.append(lane)
                continue
            ids = _reserve(conn, provider, lane, now_ms, stamp, want)
            got[lane] += ids
            room -= len(ids)
            if len(ids) == want:
                still.append(lane)
        if len(still) == len(active) and share == 0:
            break  # every lane that was asked gave all it was asked: room is spent
        active = still
    return got


def claim_due(conn: Connection, provider: str, now_ms: int, limit: int,
              turn: int = 0, normal_limit: int | None = None) -> list[Claimed]:
    """Reserve up to ``limit`` due messages of ``provider`` for sending (a write unit).

    The order (OPS-1): high-priority messages first (single sends, by default); then
    the room left is shared evenly, round robin, between the normal lanes: single
    messages sent with ``priority`` normal, and each campaign that may send now
    (running, its ``send_at`` passed, its window open). ``turn`` rotates which lane gets
    the remainder, so over successive claims every lane gets the same. Within a lane:
    ``RETRY`` whose ``next_attempt_at`` has come, then ``QUEUED``, oldest first. At most
    ``limit`` in all, and at most ``normal_limit`` (when given) of normal priority.

    Reserving writes ``claimed_at`` only: the messages stay ``QUEUED``/``RETRY`` (nothing
    is sent yet) and :func:`mark_sending` makes each ``SENDING`` just before it goes. The
    result is in sending order: high first, then the lanes interleaved.

    A due message whose number is on its account's suppression list (OPS-4: suppressed
    after it was queued) and of which no part has gone out becomes ``CANCELLED`` (error
    ``suppressed``) in the same unit instead: never submitted; so does one whose validity
    ran out (ROUTE-4, ``expired before sending``). A batch that was all
    suppressed is followed by the next due messages, a few batches at most per unit.
    """
    stamp = max(1, now_ms)
    for _ in range(CLAIM_ROUNDS):
        high = _reserve(conn, provider, HIGH_LANE, now_ms, stamp, limit)
        by_lane: dict[Lane, list[int]] = {HIGH_LANE: high}
        campaigns: dict[int, Any] = {}
        room = limit - len(high) if normal_limit is None else min(normal_limit,
                                                                  limit - len(high))
        if room > 0:
            waiting = campaigns_waiting(conn, provider)
            campaigns = {cid: c for cid, c in sendable_campaigns(conn, waiting).items()
                         if c.sendable(now_ms)}
            lanes = [NORMAL_SINGLES] + [Lane(PRIORITY_NORMAL, cid) for cid in sorted(campaigns)]
            k = turn % len(lanes)
            by_lane.update(_fair_shares(conn, provider, lanes[k:] + lanes[:k], now_ms, stamp,
                                        room))
        ids = [i for got in by_lane.values() for i in got]
        if not ids:
            return []
        cancelled = 0
        by_id = dialect.of(conn).by_rowid
        for chunk in in_chunks(ids):
            marks = ",".join("?" * len(chunk))
            # One statement for both (ROUTE-4: a validity that ran out); a message
            # without a validity reads as before.
            conn.execute(
                f"UPDATE messages{by_id} SET state = 'CANCELLED', error = CASE WHEN"
                f" {EXPIRED_SQL} THEN ? ELSE ? END, updated_at = ?,"
                " claimed_at = NULL, finalised_at = COALESCE(finalised_at, ?)"
                f" WHERE id IN ({marks}) AND state IN ('QUEUED', 'RETRY') AND"
                f" ({EXPIRED_SQL} OR {IS_SUPPRESSED_SQL}) AND NOT EXISTS (SELECT 1 FROM"
                " message_parts p WHERE p.message_id = messages.id"
                f" AND p.state <> '{PART_TO_SEND}')",
                (now_ms, EXPIRED_BEFORE_SENDING, SUPPRESSED, now_ms, now_ms, *chunk, now_ms),
            )
            cancelled += conn.changes()
        rows: dict[int, Any] = {}
        for chunk in in_chunks(ids):
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(
                    "SELECT id, ref, msisdn, body, attempts, parts, campaign_id, priority,"
                    f" state, encoding, message_type, {RECIPIENT_TYPE_SQL}, expires_at"
                    f" FROM messages{by_id} WHERE id IN ({marks})"
                    " AND claimed_at = ?",
                    (*chunk, stamp)):
                rows[as_int(r[0])] = r
        if rows or not cancelled:
            retried = [i for i, r in rows.items() if r[8] == "RETRY"]
            earlier = known_parts(conn, retried) if retried else {}

            order = [i for i in high if i in rows]
            lanes_left = [[i for i in got if i in rows]
                          for lane, got in by_lane.items() if lane != HIGH_LANE]
            for n in range(max((len(g) for g in lanes_left), default=0)):
                order += [g[n] for g in lanes_left if n < len(g)]
            return [_claimed(rows[i], earlier, campaigns) for i in order]
    return []


def _claimed(r: Any, earlier: dict[int, list[tuple[int, str]]],
             campaigns: dict[int, Any]) -> Claimed:
    cid = None if r[6] is None else int(r[6])
    camp = campaigns.get(cid) if cid is not None else None
    return Claimed(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), int(r[5]),
                   tuple(earlier.get(int(r[0]), ())), cid, int(r[7]),
                   camp.window if camp is not None else None, str(r[9]),
                   None if r[10] is None else str(r[10]), None if r[11] is None else str(r[11]),
                   None if r[12] is None else int(r[12]))


def mark_sending(conn: Connection, claimed: list[Claimed], now_ms: int,
                 consent_gate: bool = False, provider: str | None = None) -> list[Claimed]:
    """Make reserved messages ``SENDING`` just before their bytes go (a write unit).

    Only messages still reserved and still ``QUEUED``/``RETRY`` are taken, and a campaign
    message only while its campaign is ``RUNNING``: a pause or a cancel committed before
    this unit keeps them from being sent. Returns those taken, ``attempts`` counting
    this one (the money rule: each is durably ``SENDING`` before anything leaves). One
    whose validity ran out while it waited (a held lane) becomes ``CANCELLED`` instead.
    With ``provider``, only messages still of that provider: one that failed over to
    another meanwhile (ROUTE-3) is that one's to send.
    """
    by_id = {m.id: m for m in claimed}
    out: list[Claimed] = []
    each = dialect.of(conn).by_rowid
    for chunk in in_chunks(list(by_id)):
        if consent_gate:  # IYS-2: a RET committed before this unit stops the message
            chunk = [i for i in chunk if i not in refused_now(conn, chunk, now_ms)]
            if not chunk:
                continue
        cancel_expired(conn, chunk, now_ms)  # ROUTE-4: held too long, never sent
        marks = ",".join("?" * len(chunk))
        rows: list[Any] = conn.execute(
            f"UPDATE messages{each} SET state = 'SENDING', attempts = attempts + 1,"
            f" claimed_at = NULL, lease_owner = ?, updated_at = ? WHERE id IN ({marks})"
            " AND claimed_at IS NOT NULL"
            f"{'' if provider is None else ' AND provider = ?'}"
            " AND state IN ('QUEUED', 'RETRY') AND (campaign_id IS NULL OR EXISTS"
            " (SELECT 1 FROM campaigns c WHERE c.id = messages.campaign_id"
            " AND c.state = 'RUNNING')) RETURNING id, attempts, account_id, msisdn,"
            " message_type", (OWNER, now_ms, *chunk,
                              *(() if provider is None else (provider,)))).fetchall()
        if consent_gate:
            note_sent(conn, [(int(r[2]), str(r[3])) for r in rows if r[4] == COMMERCIAL],
                      now_ms)
        out += [replace(by_id[int(r[0])], attempts=int(r[1])) for r in rows]
    out.sort(key=lambda m: m.id)
    return out


def release_claimed(conn: Connection, ids: list[int] | None = None,
                    provider: str | None = None) -> int:
    """Give reserved messages back, unsent (a write unit): these ``ids``, or every one of
    ``provider`` (at start, after a crash). They are claimed again in their turn."""
    released = 0
    if provider is not None and dialect.of(conn).is_postgresql:
        released += release_orphaned(conn, provider, None)  # not live processes' own
    elif provider is not None:
        conn.execute(release_claimed_sql(False), (provider,))
        released += conn.changes()
    each = dialect.of(conn).by_rowid
    for chunk in in_chunks(ids or []):
        conn.execute(f"UPDATE messages{each} SET claimed_at = NULL WHERE claimed_at IS NOT NULL"
                     f" AND id IN ({','.join('?' * len(chunk))})", tuple(chunk))
        released += conn.changes()
    return released


def next_due_ms(conn: Connection) -> int | None:
    """The earliest ``next_attempt_at`` among resendable messages (a read unit).

    One index lookup per state (``messages_due``), whatever the provider: at worst the
    loop looks once more than it needed to.
    """
    found: list[int] = []
    for state in ("RETRY", "QUEUED"):
        row: Any = conn.execute(
            "SELECT MIN(next_attempt_at) FROM messages WHERE state = ?", (state,)).fetchone()
        if row is not None and row[0] is not None:
            found.append(int(row[0]))
    return min(found) if found else None


def release_orphaned(conn: Connection, provider: str, reserved_before: int | None) -> int:
    """Give back the reservations of ``provider`` made by processes that are gone (or by
    none), and those made before ``reserved_before`` when given."""
    gone = tuple(sorted(dead_owners(conn, (str(r[0]) for r in conn.execute(
        "SELECT DISTINCT lease_owner FROM messages WHERE provider = ? AND claimed_at IS NOT"
        " NULL AND state IN ('QUEUED', 'RETRY') AND lease_owner IS NOT NULL", (provider,))))))
    whose = "lease_owner IS NULL" + (
        f" OR lease_owner IN ({','.join('?' * len(gone))})" if gone else "")
    older = "" if reserved_before is None else " OR claimed_at <= ?"
    conn.execute("UPDATE messages SET claimed_at = NULL WHERE provider = ? AND claimed_at"
                 f" IS NOT NULL AND state IN ('QUEUED', 'RETRY') AND ({whose}{older})",
                 (provider, *gone, *(() if reserved_before is None else (reserved_before,))))
    return conn.changes()
