"""What an SMPP session receives, stored first (SMPP-4, SMPP-5, OPS-4).

Every ``deliver_sm`` is one write unit, and the session answers ``ESME_ROK`` only after
that unit committed (:meth:`SessionIntake.deliver` returns ``True``); a unit that fails
(a full disk, a database that refuses the write) makes it ``False``, the session
answers ``ESME_RX_T_APPN`` and the SMSC delivers the PDU again.

- **A receipt** is kept raw in ``raw_reports`` (method ``SMPP``, content type
  ``application/vnd.smpp.deliver-sm``, the PDU byte for byte), exactly as a callback is,
  and filed in ``report_inbox`` under ``(provider, id key, status, done date)``: the
  canonical form of the SMSC's id (:mod:`appliance.smpp.ids`), the SMSC's status word,
  our state, ``err:``. It is applied in the same unit to the part whose id has that key
  (and to its message through the aggregate), or waits: the sender's outcome unit
  applies it as soon as the id is recorded (DLR-6), the reconciler retries it (DLR-4).
  A repeat of the same receipt only bumps ``repeats``. Applying runs under a savepoint
  of its own: should it fail, the receipt stays filed and waiting, and is still
  answered ``ESME_ROK`` (it is stored).
- **A receipt that cannot be read** (no id, no state) is kept raw with ``parsed = 0``
  and the reason, and answered ``ESME_ROK``: it is stored, and redelivering it would
  not make it readable.
- **Anything else** is an inbound message: :func:`appliance.inbound.store.receive_inbound`
  (raw in ``raw_inbound``, the message, its parts, STOP keywords suppressing the
  sender), in one unit.

A ``submit_sm_resp`` that came after its segment was reported UNCERTAIN, and segments
reported UNCERTAIN, are handed to :mod:`appliance.smpp.uncertain` through this object
(:meth:`late_response`, :meth:`uncertain`); the session's loop
(:mod:`appliance.smpp.lifecycle`) settles them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from appliance.inbound.store import (
    SMPP_CONTENT_TYPE,
    InboundRules,
    receive_inbound,
    receive_request,
    sender_number,
)
from appliance.reports.apply import settle
from appliance.reports.inbox import InboxReport, RawCallback, file_report, store_raw
from appliance.reports.states import Verdict
from appliance.smpp.deliver import Deliver
from appliance.smpp.state import IntakeCounts
from appliance.smpp.submission import LateResponse
from appliance.store.connection import Connection
from appliance.store.writer import Writer

log = logging.getLogger("appliance.smpp")

RAW_METHOD = "SMPP"
LATE_KEPT = 10_000  # late submit_sm_resp ids waiting for their outcome to be recorded


@dataclass
class Pending:
    """What the session loop still has to settle (:mod:`appliance.smpp.uncertain`)."""

    late: list[tuple[float, LateResponse]] = field(default_factory=list)
    uncertain_seen: int = 0  # segments reported UNCERTAIN since the last orphan sweep


def raw_request(provider: str, d: Deliver) -> RawCallback:
    return RawCallback(provider=provider, method=RAW_METHOD, content_type=SMPP_CONTENT_TYPE,
                       query="", body=d.raw)


def store_receipt(conn: Connection, provider: str, d: Deliver, now_ms: int) -> str:
    """A receipt's write unit; returns ``applied``, ``waiting``, ``repeat`` or
    ``unreadable``."""
    raw_id = store_raw(conn, raw_request(provider, d), now_ms, parsed=d.receipt is not None,
                       error=d.error)
    r = d.receipt
    if r is None:
        return "unreadable"
    report = InboxReport(provider=provider, ref="", provider_msg_id=r.key, status=r.status,
                         reported_at=max(r.done_at_ms, 0), state=r.state,
                         error_code=r.error_code, source="session")
    row = file_report(conn, report, raw_id, now_ms)
    if row is None:
        return "repeat"
    conn.execute("SAVEPOINT smpp_apply")
    try:
        verdict = settle(conn, row, now_ms)
    except Exception:  # filed and stored: the reconciler applies it later
        conn.execute("ROLLBACK TO smpp_apply")
        conn.execute("RELEASE smpp_apply")
        log.exception("smpp %s: applying receipt %s failed; it waits in the inbox",
                      provider, r.key)
        return "waiting"
    conn.execute("RELEASE smpp_apply")
    return "waiting" if verdict is Verdict.WAIT else "applied"


def store_inbound(conn: Connection, rules: InboundRules, provider: str, d: Deliver,
                  now_ms: int) -> str:
    """An inbound ``deliver_sm``'s write unit (a message, or one part of one)."""
    if d.error is not None:
        receive_request(conn, rules, raw_request(provider, d), [], d.error, now_ms)
        return "unreadable"
    concat = d.concat
    receive_inbound(
        conn, rules, provider, msisdn=d.source_addr, to=d.destination_addr,
        text=d.text if d.text is not None else "", provider_msg_id=None, raw=d.raw,
        now_ms=now_ms,
        concat_ref=None if concat is None else concat_ref(conn, rules, provider, d, concat),
        part=1 if concat is None else concat[2], parts=1 if concat is None else concat[1])
    return "inbound"


def concat_ref(conn: Connection, rules: InboundRules, provider: str, d: Deliver,
               concat: tuple[int, int, int]) -> str:
    """The reference that joins one sender's parts into one message.

    The UDH's reference has 8 (or 16) bits, so one sender's long messages reuse it:
    each message with that reference is ``udh:<ref>#<n>``. A part whose number and text
    one of them has already is a repeat of it; otherwise it joins the latest that lacks
    that part and is not complete, or starts the next ``n`` (a new message).
    """
    ref, total, part = concat
    msisdn = sender_number(d.source_addr, rules.region)
    text = d.text if d.text is not None else ""
    open_one: int | None = None
    generation = 0
    while True:
        found: Any = conn.execute(
            "SELECT id, parts, parts_received FROM inbound_messages WHERE provider = ?"
            " AND provider_msg_id = ?",
            (provider, f"parts:{msisdn}:udh:{ref}#{generation}:{total}")).fetchone()
        if found is None:
            break
        had: Any = conn.execute("SELECT text FROM inbound_parts WHERE inbound_id = ?"
                                " AND part = ?", (int(found[0]), part)).fetchone()
        if had is not None and str(had[0]) == text:
            return f"udh:{ref}#{generation}"  # a repeat of this part
        if had is None and int(found[2]) < int(found[1]):
            open_one = generation
        generation += 1
    return f"udh:{ref}#{generation if open_one is None else open_one}"


class SessionIntake:
    """One SMPP provider's :class:`~appliance.smpp.transport.SessionSink`."""

    def __init__(self, provider: str, writer: Writer[Connection], rules: InboundRules,
                 now_ms: Callable[[], int], on_work: Callable[[], None] | None = None) -> None:
        self.provider = provider
        self.writer = writer
        self.rules = rules
        self.now_ms = now_ms
        self.counts = IntakeCounts()
        self.pending = Pending()
        self._on_work = on_work or (lambda: None)

    async def deliver(self, d: Deliver) -> bool:
        now = self.now_ms()
        provider = self.provider
        if d.is_receipt:
            def unit(c: Connection) -> str:
                return store_receipt(c, provider, d, now)
        else:
            rules = self.rules

            def unit(c: Connection) -> str:
                return store_inbound(c, rules, provider, d, now)
        try:
            what = await self.writer.run(unit)
        except Exception as exc:
            self.counts.store_failures += 1
            log.warning("smpp %s: deliver_sm %d not stored (%s: %s); answering"
                        " ESME_RX_T_APPN so the SMSC delivers it again", provider, d.sequence,
                        type(exc).__name__, exc)
            return False
        c = self.counts
        if what == "inbound":
            c.inbound += 1
        elif what == "unreadable":
            c.unreadable += 1
            log.warning("smpp %s: deliver_sm %d kept raw, not read: %s", provider, d.sequence,
                        d.error)
        else:
            c.receipts += 1
            if what == "repeat":
                c.repeats += 1
            elif what == "waiting":
                c.receipts_waiting += 1
            else:
                c.receipts_applied += 1
        return True

    async def late_response(self, late: LateResponse) -> None:
        if late.id_key is None:
            return  # not taken after all, or taken without an id: nothing to record
        self.pending.late.append((time.monotonic(), late))
        del self.pending.late[:-LATE_KEPT]
        self._on_work()

    def uncertain(self, ref: str, part: int) -> None:
        self.pending.uncertain_seen += 1
