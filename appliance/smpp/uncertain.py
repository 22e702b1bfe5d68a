"""UNCERTAIN parts settled by what the SMSC says later (SMPP-2, SMPP-5).

A segment written whose ``submit_sm_resp`` never came is UNCERTAIN and has no id, so
a receipt for it (which names only the SMSC's id) matches nothing and waits. Two
things close that gap where it can be closed:

* **A late answer.** The session remembers timed-out segments; a ``submit_sm_resp``
  that still comes (:class:`~appliance.smpp.submission.LateResponse`) names the id.
  :func:`record_late_id` records it for that part (the ``provider_ids`` mapping and
  the part's id), turns the part from UNCERTAIN to SUBMITTED (the SMSC has it), sets
  the message's state from its parts, and applies the receipts already waiting under
  that id. While the message's outcome is not recorded yet (it is still ``SENDING``)
  it answers ``later`` and the session's loop tries again.
* **The receipt itself.** A receipt whose id no part has, still waiting a while after
  it came (longer than a ``submit_sm_resp`` may take), is matched by what else it
  carries (:func:`match_orphans`): the recipient (the receipt's ``source_addr``) and the
  first characters of the text (``text:``). It is bound to an UNCERTAIN part without
  an id of a message to that number through this provider when exactly one such part
  fits (the text excerpt, when the receipt has one, must be the start of that part's
  text, as octets or as characters). Nothing is bound while a message to that number
  is being sent (its own id may still come), nor when two parts fit: such a receipt
  keeps waiting, and the part stays UNCERTAIN for a person to resolve.

The second rule is what lets a session dropped mid-window, or a process killed while
segments were in flight, end with every receipt the SMSC was answered ``ESME_ROK`` for
applied to its part. Both are write units.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from appliance.inbound.store import sender_number
from appliance.message_text.segments import segment_as
from appliance.reports.aggregate import message_state
from appliance.reports.apply import apply_waiting_for_refs
from appliance.smpp.encoding import payload
from appliance.smpp.pdu import TLV_MESSAGE_PAYLOAD, PduError, read_short_message
from appliance.smpp.receipt import parse_text
from appliance.smpp.submission import LateResponse
from appliance.store.connection import Connection

ORPHAN_BATCH = 200  # waiting receipts looked at per unit
# Message states whose state the part change may move (not SENDING: the sender is
# about to record it from the claim's view of its parts).
_SETTLED_BY_SENDER = ("RETRY", "UNCERTAIN", "SUBMITTED")


def _recompute(conn: Connection, message_id: int, old_state: str, now_ms: int) -> None:
    states = [str(r[0]) for r in conn.execute(
        "SELECT state FROM message_parts WHERE message_id = ?", (message_id,))]
    if not states:
        return
    new = message_state(states)
    if new == old_state:
        return
    conn.execute(
        "UPDATE messages SET state = ?, error = CASE WHEN ? = 'SUBMITTED' THEN NULL"
        " ELSE error END, submitted_at = coalesce(submitted_at, ?), updated_at = ?"
        " WHERE id = ? AND state = ?", (new, new, now_ms, now_ms, message_id, old_state))


def record_late_id(conn: Connection, provider: str, late: LateResponse,
                   now_ms: int) -> str:
    """Record a late ``submit_sm_resp``'s id for its part (a write unit).

    ``recorded``; ``later`` (the message's outcome is not recorded yet); ``known`` (the
    id is mapped already, or the part has an id); ``gone`` (no such message or part).
    """
    key = late.id_key
    if key is None:
        return "gone"
    row: Any = conn.execute("SELECT id, state FROM messages WHERE ref = ? AND provider = ?",
                            (late.ref, provider)).fetchone()
    if row is None:
        return "gone"
    message_id, state = int(row[0]), str(row[1])
    if state in ("QUEUED", "SENDING"):
        return "later"
    part: Any = conn.execute(
        "SELECT state, provider_msg_id FROM message_parts WHERE message_id = ? AND part = ?",
        (message_id, late.part)).fetchone()
    if part is None:
        return "gone"
    if part[1] is not None:
        return "known"
    conn.execute("INSERT INTO provider_ids (provider, provider_msg_id, ref, part)"
                 " VALUES (?, ?, ?, ?) ON CONFLICT (provider, provider_msg_id) DO NOTHING",
                 (provider, key, late.ref, late.part))
    if conn.changes() == 0:
        return "known"
    conn.execute(
        "UPDATE message_parts SET provider_msg_id = ?, submitted_at = coalesce(submitted_at, ?),"
        " state = CASE WHEN state = 'UNCERTAIN' THEN 'SUBMITTED' ELSE state END,"
        " error = CASE WHEN state = 'UNCERTAIN' THEN NULL ELSE error END, updated_at = ?"
        " WHERE message_id = ? AND part = ?", (key, now_ms, now_ms, message_id, late.part))
    if state in _SETTLED_BY_SENDER:
        _recompute(conn, message_id, state, now_ms)
    apply_waiting_for_refs(conn, [late.ref], now_ms, [(provider, key)], provider=provider)
    return "recorded"


@dataclass(frozen=True)
class Orphan:
    """A waiting receipt whose id no part has."""

    inbox_id: int
    key: str
    raw: bytes | None


def orphans(conn: Connection, provider: str, received_before_ms: int, after_id: int,
            limit: int) -> list[Orphan]:
    """Waiting receipts of ``provider`` with ``id > after_id``, filed before
    ``received_before_ms``, whose id is mapped to no part (a read unit or part of one)."""
    # ``next_try_at >= 0`` (true of every row) makes the plan read the waiting rows
    # (report_inbox_waiting), not the provider's whole history of receipts.
    rows: list[Any] = conn.execute(
        "SELECT i.id, i.provider_msg_id, r.body FROM report_inbox i"
        " LEFT JOIN raw_reports r ON r.id = i.raw_id"
        " WHERE i.applied_at IS NULL AND i.next_try_at >= 0 AND i.provider = ?"
        " AND i.ref = '' AND i.id > ?"
        " AND i.received_at <= ? AND i.provider_msg_id <> ''"
        " AND NOT EXISTS (SELECT 1 FROM provider_ids p WHERE p.provider = i.provider"
        " AND p.provider_msg_id = i.provider_msg_id)"
        " ORDER BY i.id LIMIT ?", (provider, after_id, received_before_ms, limit)).fetchall()
    return [Orphan(int(r[0]), str(r[1]), None if r[2] is None else bytes(r[2])) for r in rows]


def excerpt_fits(excerpt: str, body: str, part: int, encoding: str = "GSM-7") -> bool:
    """Is ``excerpt`` (a receipt's ``text:``) the start of part ``part`` of ``body``?

    Compared with the part's octets as sent (read as Latin-1, what most SMSCs copy)
    and with its characters; ``encoding`` is the message's, as accepted.
    """
    seg = segment_as(body, encoding)
    if not 1 <= part <= seg.count:
        return False
    text = seg.parts[part - 1]
    forms = [text.lstrip()]
    with contextlib.suppress(ValueError):
        forms.append(payload(text, seg.encoding, seg.tables).decode("latin-1").lstrip())
    return any(f.startswith(excerpt) or (len(f) >= 4 and excerpt.startswith(f))
               for f in forms)


@dataclass
class Swept:
    matched: int = 0  # receipts bound to an UNCERTAIN part (with their repeats applied)
    ambiguous: int = 0  # more than one part fits: left waiting
    no_part: int = 0  # no UNCERTAIN part fits
    busy: int = 0  # a message to that number is being sent: looked at again later
    last_id: int = 0  # the cursor: every orphan up to here was looked at
    looked: int = 0  # orphans read (fewer than the limit: there are no more)


def match_orphans(conn: Connection, provider: str, region: str, now_ms: int,
                  received_before_ms: int, after_id: int, limit: int = ORPHAN_BATCH) -> Swept:
    """Bind waiting receipts whose id we never learnt to the UNCERTAIN part they are
    about, where exactly one fits (a write unit; see the module docstring)."""
    found = orphans(conn, provider, received_before_ms, after_id, limit)
    out = Swept(last_id=found[-1].inbox_id if found else after_id, looked=len(found))
    seen: set[str] = set()
    for o in found:
        if o.key in seen:
            continue
        seen.add(o.key)
        if o.raw is None:
            continue  # the raw PDU was pruned: nothing left to match by
        verdict = _bind_one(conn, provider, region, o, now_ms)
        if verdict == "busy":
            out.busy += 1
            out.last_id = min(out.last_id, o.inbox_id - 1)
        elif verdict == "matched":
            out.matched += 1
        elif verdict == "ambiguous":
            out.ambiguous += 1
        else:
            out.no_part += 1
    return out


def _bind_one(conn: Connection, provider: str, region: str, o: Orphan,
              now_ms: int) -> str:
    assert o.raw is not None
    try:
        sm = read_short_message(o.raw)
    except PduError:
        return "no_part"
    recipient = sender_number(sm.source_addr, region)
    text = (sm.short_message or sm.tlv(TLV_MESSAGE_PAYLOAD) or b"").decode("latin-1")
    excerpt = parse_text(text).get("text", "")
    # By number (messages_msisdn, over every account), the provider checked here: an
    # index on provider would walk all of the provider's messages.
    to_number = conn.execute(
        "SELECT provider, state FROM messages WHERE account_id IN (SELECT id FROM accounts)"
        " AND msisdn = ?", (recipient,)).fetchall()
    if any(str(r[0]) == provider and r[1] == "SENDING" for r in to_number):
        return "busy"
    candidates: list[Any] = [c for c in conn.execute(
        "SELECT m.id, m.ref, m.body, p.part, m.provider, m.encoding FROM messages m"
        " JOIN message_parts p ON p.message_id = m.id"
        " WHERE m.account_id IN (SELECT id FROM accounts) AND m.msisdn = ?"
        " AND p.state = 'UNCERTAIN' AND p.provider_msg_id IS NULL", (recipient,),
    ).fetchall() if str(c[4]) == provider]
    if excerpt:
        candidates = [c for c in candidates if excerpt_fits(excerpt, str(c[2]), int(c[3]),
                                                          str(c[5]))]
    if not candidates:
        return "no_part"
    if len(candidates) > 1:
        return "ambiguous"
    message_id, ref, _body, part, _provider, _encoding = candidates[0]
    conn.execute("INSERT INTO provider_ids (provider, provider_msg_id, ref, part)"
                 " VALUES (?, ?, ?, ?) ON CONFLICT (provider, provider_msg_id) DO NOTHING",
                 (provider, o.key, ref, part))
    if conn.changes() == 0:
        return "no_part"
    conn.execute("UPDATE message_parts SET provider_msg_id = ?, updated_at = ?"
                 " WHERE message_id = ? AND part = ? AND provider_msg_id IS NULL",
                 (o.key, now_ms, message_id, part))
    apply_waiting_for_refs(conn, [str(ref)], now_ms, [(provider, o.key)], provider=provider)
    return "matched"
