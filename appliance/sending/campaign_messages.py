"""A campaign's messages: created from its list chunk by chunk, by the ``campaigns`` loop.

Each unit writes up to :data:`EXPANSION_CHUNK` messages and the new position
(``queued_after``, the last number done; ``queued_through`` once all are) together,
guarded by the old position. Killed between units, expansion resumes from the recorded
position; the ``UNIQUE (campaign_id, msisdn)`` index makes a second message for the same
number impossible.

The contacts are taken in the order of their numbers (byte order, read along the
list's ``UNIQUE (list_id, msisdn)`` index), not of their ids: a chunk's messages are
then a run of neighbouring numbers, and each index of ``messages`` keyed by the number
(the campaign's, and the account's, which in Turkey also holds the duplicate-today key)
takes them as a run of neighbouring keys, so a commit writes a few pages of each. Taken
by id, a list imported in no particular order put each chunk's numbers all over those
indexes, and each commit rewrote about a page per message in each of them: a campaign of
100,000 numbers took about nine times as long (``bench/bench_consent_expansion.py
--shuffled``). So a campaign's messages are created, and sent, in number order.

A contact whose number is on the account's suppression list gets its message created
``CANCELLED`` (error ``suppressed``): counted, never sent. Each message carries the text
rendered for its contact, with its own encoding and parts (OPS-3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from appliance.message_text.segments import TURKISH_TABLES, Counting, Segmentation, segment
from appliance.optout.consents import ALLOWED_SQL, NO_CONSENT
from appliance.optout.suppressions import SUPPRESSED
from appliance.sending.campaigns import COLUMNS, PRIORITY_NORMAL, Campaign, campaign_of_row
from appliance.sending.duplicates import DUPLICATE_TODAY, DayKeys, live_keys
from appliance.sending.validity import expires_at
from appliance.store.changes import executemany_changes
from appliance.store.connection import Connection

EXPANSION_CHUNK = 2000


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
    return None if row is None else campaign_of_row(row)


@dataclass(frozen=True)
class RoutedTo:
    """Where one message of a routed campaign goes (ROUTE-3): its provider, the prefix of
    the route that chose it, that provider's ``max_parts``, and how it sends to the
    number (the Turkish tables its kind signals there, its count: ENC-1)."""

    provider: str
    route: str | None
    max_parts: int
    counting: Counting


def expand_chunk(conn: Connection, campaign: Campaign, new_ref: Callable[[], str],
                 now_ms: int, chunk: int = EXPANSION_CHUNK, max_parts: int = 0,
                 turkish_prefixes: Sequence[str] = (), consent_gate: bool = False,
                 sender: str | None = None, counting: Counting = TURKISH_TABLES,
                 routing: Callable[[str, str], RoutedTo] | None = None) -> int:
    """Create the messages for the next ``chunk`` contacts (a write unit).

    Returns how many messages were created. The position moves only if it is still
    where ``campaign`` says and the campaign is not cancelled (two expanders can never
    both advance it, and a cancel stops it). Each message carries the text rendered
    for its contact; one whose text needs more than ``max_parts`` parts (when given) is
    created ``REJECTED``, never sent. Messages are due at ``send_at`` at the earliest.
    Parts are counted as the provider sends (``counting``, its kind's: with its Turkish
    tables for the numbers in ``turkish_prefixes``). With ``routing`` (a routed
    campaign, ROUTE-3), each message goes where it says for its number and ref,
    segmented for that provider.
    """
    after = campaign.queued_after or ""
    # IYS-2: a commercial campaign in Turkey reaches only numbers with consent, looked
    # up with the contact. The statement reads along the list's (list_id, msisdn) index
    # from the position and stops at the chunk (no sort), so it looks up the chunk's
    # numbers only. The ids bound the campaign's contacts (``+`` keeps SQLite from
    # reading by the rowid).
    consents = (" LEFT JOIN consents k ON k.account_id = ? AND k.msisdn = c.msisdn",
                f"k.id IS NOT NULL AND {ALLOWED_SQL}") if consent_gate else ("", "1 = 1")
    contacts: list[Any] = conn.execute(
        f"SELECT c.id, c.msisdn, c.name, s.id IS NOT NULL, {consents[1]} FROM contacts c"
        " LEFT JOIN suppressions s ON s.account_id = ? AND s.msisdn = c.msisdn"
        f"{consents[0]} WHERE c.list_id = ? AND c.msisdn > ? AND +c.id > ? AND +c.id <= ?"
        " ORDER BY c.msisdn LIMIT ?",
        (campaign.account_id, *((campaign.account_id,) if consent_gate else ()),
         campaign.list_id, after, campaign.queued_through, campaign.last_contact_id, chunk),
    ).fetchall()
    last = str(contacts[-1][1]) if contacts else after
    through = campaign.last_contact_id if len(contacts) < chunk else campaign.queued_through
    conn.execute(
        "UPDATE campaigns SET queued_through = ?, queued_after = ?, updated_at = ?"
        " WHERE id = ? AND queued_through = ? AND COALESCE(queued_after, '') = ?"
        " AND state <> 'CANCELLED'",
        (through, last or None, now_ms, campaign.id, campaign.queued_through, after),
    )
    if conn.changes() != 1:
        return 0
    template = campaign.template
    due = max(now_ms, campaign.send_at or 0)
    expiry = expires_at(campaign.validity_s or 0, due)  # ROUTE-4: from the due time
    segs: dict[tuple[str, Counting], Segmentation] = {}
    rows: list[tuple[Any, ...]] = []
    day_keys = None if sender is None else DayKeys(campaign.account_id, sender, due)
    for _cid, msisdn, name, suppressed, consented in contacts:
        text = template.render(None if name is None else str(name))
        ref = new_ref()
        to = RoutedTo(campaign.provider, None, max_parts,
                      counting if any(str(msisdn).startswith(p) for p in turkish_prefixes)
                      else counting.plain) \
            if routing is None else routing(str(msisdn), ref)
        key = (text, to.counting)
        seg = segs.get(key)
        if seg is None:
            seg = segs[key] = segment(*key)
        # A suppressed contact's message is created CANCELLED (never sent), so the
        # campaign's counts add up to its total (OPS-4).
        state, error = ("CANCELLED", SUPPRESSED) if suppressed else (
            ("QUEUED", None) if consented else ("CANCELLED", NO_CONSENT))
        if state == "QUEUED" and to.max_parts and seg.count > to.max_parts:
            state, error = "REJECTED", (f"the personalised text needs {seg.count} parts,"
                                        f" more than the provider's max_parts"
                                        f" ({to.max_parts})")
        rows.append((ref, campaign.account_id, campaign.id, to.provider, msisdn,
                     text, state, error, due, now_ms, now_ms,
                     now_ms if state != "QUEUED" else None, seg.encoding, seg.count,
                     seg.ucs2_because, PRIORITY_NORMAL, seg.ucs2_parts, campaign.message_type,
                     # IYS-4 (sender given: country TR): keyed, a repeat today found below.
                     day_keys.of(str(msisdn), text)
                     if day_keys is not None and state == "QUEUED" else None, expiry,
                     to.route))
    if day_keys is None or not any(r[-3] is not None for r in rows):
        return executemany_changes(conn, _INSERT.format(on="(campaign_id, msisdn)"), rows)
    # IYS-4: the unique index messages_msisdn (account_id, msisdn, dup_key) is the check.
    # Usually no number of the chunk had the text today: every message goes in at once,
    # each key checked by the insert into the index it is written to anyway. If any
    # did not go in (a repeat, or a message the campaign already has), the chunk is
    # undone and made again with the repeats looked up first, so they are created
    # CANCELLED, counted, in their place among the others.
    # (Outside a transaction, as a script may call it, nothing could be undone: the
    # repeats are looked up first.)
    undoable = conn.in_transaction
    if undoable:
        conn.execute("SAVEPOINT keyed_chunk")
        made = executemany_changes(conn, _INSERT.format(on=""), rows)
    if not undoable or made < len(rows):
        if undoable:
            conn.execute("ROLLBACK TO keyed_chunk")
        taken = live_keys(conn, campaign.account_id,
                          ((r[4], r[-3]) for r in rows if r[-3] is not None))
        for i, row in enumerate(rows if taken else ()):
            if row[-3] in taken:  # created CANCELLED, counted: the campaign adds up
                rows[i] = (*row[:6], "CANCELLED", DUPLICATE_TODAY, *row[8:11], now_ms,
                           *row[12:-3], None, *row[-2:])
        made = executemany_changes(conn, _INSERT.format(on="(campaign_id, msisdn)"), rows)
    if undoable:
        conn.execute("RELEASE keyed_chunk")
    return made


_INSERT = ("INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body,"
           " state, error, attempts, next_attempt_at, created_at, updated_at, finalised_at,"
           " encoding, parts, ucs2_because, priority, ucs2_parts, message_type, dup_key,"
           " expires_at, route)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
           " ON CONFLICT {on} DO NOTHING")
