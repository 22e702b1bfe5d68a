"""The transport of ``kind = "smpp"``: a message in, one ``submit_sm`` per segment out.

:class:`SmppTransport` is a :class:`~appliance.providers.base.Transport`, a peer of the
HTTP kinds' connection pool. It owns the provider's :class:`SmppSession` (window,
rate, reconnects) and, per message:

1. splits the body with the appliance's one segmentation, in the encoding decided at
   acceptance (:func:`appliance.message_text.segments.segment_as`: the encoding, the
   Turkish tables and the parts the API showed and the message row counts);
2. encodes each part not in ``skip_parts`` (GSM-7 and GSM-7 Turkish ``data_coding`` 0,
   UCS-2 8; with a concatenation UDH carrying the part's number in the whole message
   when there are several, so a part sent again alone still joins the others on the
   handset, and the Turkish shift elements beside it, :mod:`appliance.smpp.encoding`);
3. submits them through the session and answers ``Outcome.of_parts``, one
   :class:`PartOutcome` per segment sent (MSG-3):

   - ``ESME_ROK``: ACCEPTED, the part's id the SMSC's id in canonical form
     (:mod:`appliance.smpp.ids`), what its receipts are filed under;
   - ``ESME_RTHROTTLED``, ``ESME_RMSGQFUL``: RETRY after 1 s (the session slows down);
   - never written (not bound, the link lost before its turn, stopping): RETRY, sent
     again by the next attempt;
   - written and never answered: UNCERTAIN, never resent; a receipt or a late
     ``submit_sm_resp`` settles it (:mod:`appliance.smpp.uncertain`);
   - any other ``command_status``: REJECTED, the status kept in the error
     (``smpp ESME_RINVDSTADR (0x0000000B)``).

A recipient that is not an E.164 number, or a text a part of which cannot be encoded,
is REJECTED before anything is written.

What the session receives (``deliver_sm``, a late ``submit_sm_resp``) goes to the
:class:`SessionSink` the appliance attaches (:mod:`appliance.smpp.lifecycle`,
:mod:`appliance.smpp.intake`);
until one is attached a ``deliver_sm`` is answered with a temporary error, so the SMSC
keeps it and delivers it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from appliance.message_text.segments import segment_as
from appliance.providers.base import (
    Outcome,
    OutgoingMessage,
    PartOutcome,
    SessionTransport,
    SubmitResult,
    short,
)
from appliance.smpp.addresses import destination
from appliance.smpp.deliver import Deliver
from appliance.smpp.encoding import encode_part
from appliance.smpp.ids import IdEvidence, IdShape
from appliance.smpp.session import NOT_BOUND, SmppSession
from appliance.smpp.settings import SmppSettings
from appliance.smpp.state import IntakeCounts, SessionState, SessionTotals
from appliance.smpp.submission import (
    LateResponse,
    Segment,
    SegmentOutcome,
    concat_reference,
    relative_validity,
)

STOP_BUDGET_S = 5.0  # how long close() gives the answers still due before unbinding


class SessionSink(Protocol):
    """Where a session's inbound traffic is stored (:mod:`appliance.smpp.intake`)."""

    async def deliver(self, d: Deliver) -> bool:
        """``True`` once the ``deliver_sm`` is durably stored (then ``ESME_ROK``)."""

    async def late_response(self, late: LateResponse) -> None:
        """A ``submit_sm_resp`` after its segment was reported UNCERTAIN."""

    def uncertain(self, ref: str, part: int) -> None:
        """A segment was just reported UNCERTAIN (its receipt may come unannounced)."""


class SmppTransport(SessionTransport):
    """One SMPP provider: its session, and messages turned into segments."""

    def __init__(self, settings: SmppSettings, *,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.settings = settings
        self.name = settings.name
        self.concurrency = settings.window
        self._source = settings.source()
        self._sink: SessionSink | None = None
        self.totals = SessionTotals()  # kept by the session's loop
        self.session = SmppSession(settings, self._deliver, on_late_response=self._late,
                                   now_ms=now_ms)
        self.started = False
        self.stop_budget_s = STOP_BUDGET_S
        self._closing: asyncio.Future[None] | None = None

    # -- life ----------------------------------------------------------------------------

    def attach(self, sink: SessionSink, evidence: IdEvidence | None = None,
               shape: IdShape | None = None) -> None:
        """Hand inbound traffic to ``sink``; ``evidence``: what ``auto`` learnt before;
        ``shape``: how the SMSC wrote its ids before."""
        self._sink = sink
        if shape is not None:
            self.session.ids.shape = dataclasses.replace(shape)
        if evidence is not None:
            self.session.ids.evidence.submit_hex |= evidence.submit_hex
            self.session.ids.evidence.text_hex |= evidence.text_hex

    async def start(self) -> None:
        """Bind in the background (reconnecting with backoff until :meth:`close`)."""
        self.started = True
        await self.session.start()

    def begin_close(self) -> None:
        """Start stopping (see :meth:`close`) without waiting for it."""
        if self.started and self._closing is None:
            self._closing = asyncio.ensure_future(self.session.stop(self.stop_budget_s))

    async def close(self) -> None:
        """Stop: segments not written yet are RETRY at once, the answers still due get
        ``stop_budget_s`` to arrive (then UNCERTAIN), what came in is stored, unbind."""
        self.begin_close()
        if self._closing is not None:
            await self._closing

    @property
    def evidence(self) -> IdEvidence:
        return self.session.ids.evidence

    def state(self) -> SessionState:
        return self.session.state()

    @property
    def intake_counts(self) -> IntakeCounts:
        """What the attached intake stored since start (zeros before it is attached)."""
        counts = getattr(self._sink, "counts", None)
        return counts if isinstance(counts, IntakeCounts) else IntakeCounts()

    @property
    def configured_rate_per_s(self) -> float:
        return self.settings.rate_per_s

    def status(self) -> Mapping[str, float | str | bool]:
        st = self.session.state()
        return {"bound": st.bound, "window": float(st.window),
                "window_in_use": float(st.window_in_use), "throttled": float(st.throttled),
                "reconnects": float(st.reconnects)}

    # -- what the session receives -------------------------------------------------------

    async def _deliver(self, d: Deliver) -> bool:
        sink = self._sink
        if sink is None:
            return False  # nowhere to keep it yet: the SMSC delivers it again
        return await sink.deliver(d)

    async def _late(self, late: LateResponse) -> None:
        if self._sink is not None:
            await self._sink.late_response(late)

    # -- submission ----------------------------------------------------------------------

    async def submit(self, msg: OutgoingMessage) -> Outcome:
        seg = segment_as(msg.body, msg.encoding)
        total = seg.count
        try:
            to = destination(msg.msisdn)
        except ValueError as exc:
            return Outcome(SubmitResult.REJECTED, error=short(f"not sent: {exc}"))
        wanted = [p for p in range(1, total + 1) if p not in msg.skip_parts]
        if not wanted:
            return Outcome(SubmitResult.UNCERTAIN, error="no part left to send")
        ref = concat_reference(msg.ref)
        validity = "" if msg.validity_s is None else relative_validity(msg.validity_s)
        refused: list[PartOutcome] = []
        segments: list[Segment] = []
        for part in wanted:
            try:
                enc = encode_part(seg.parts[part - 1], seg.encoding, part, total, ref,
                                  seg.tables, self.settings.septets)
            except ValueError as exc:
                refused.append(PartOutcome(part, SubmitResult.REJECTED,
                                           error=short(f"cannot encode: {exc}")))
                continue
            segments.append(Segment(ref=msg.ref, part=part, total=total, destination=to,
                                    source=self._source, data_coding=enc.data_coding,
                                    esm_class=enc.esm_class, short_message=enc.short_message,
                                    validity_period=validity))
        outcomes = await self.session.submit(segments) if segments else []
        parts = tuple(self._part(o) for o in outcomes) + tuple(refused)
        if self._sink is not None:
            for o in outcomes:
                if o.result is SubmitResult.UNCERTAIN:
                    self._sink.uncertain(o.ref, o.part)
        outcome = Outcome.of_parts(parts)
        if outcomes and not refused and all(o.error == NOT_BOUND for o in outcomes):
            return replace(outcome, unreached=True)  # no session: an outage, not a refusal
        return outcome

    @staticmethod
    def _part(o: SegmentOutcome) -> PartOutcome:
        if o.result is SubmitResult.ACCEPTED:
            return PartOutcome(o.part, o.result, o.id_key, o.error)
        if o.result is SubmitResult.REJECTED and o.command_status is not None:
            return PartOutcome(o.part, o.result, None,
                               f"smpp {o.status_name} (0x{o.command_status:08X})")
        return PartOutcome(o.part, o.result, None, o.error, o.retry_after_s)
