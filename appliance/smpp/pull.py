"""Asking an SMSC about the parts it has not reported: ``query_sm`` (ROUTE-2, SMPP 3.4
sections 4.8.1, 4.8.2, 5.2.28 and 7.1.1; the PDUs and their reading in
:mod:`appliance.smpp.query`).

Off for an ``smpp`` provider until its table says ``pull = true``: many SMSCs answer
``query_sm`` with ``ESME_RINVCMDID`` or not at all, and the operator knows whether
theirs does. The puller (:mod:`appliance.reports.puller`) hands :class:`SmppStatusQuery`
one message at a time (SMPP 3.4 has no batch query) with its parts
(:attr:`~appliance.providers.status_query.PullTarget.parts`); it asks about each part
not final yet by the part's own id, spelled as the SMSC wrote it
(:meth:`appliance.smpp.ids.IdReader.spelling`), from the provider's ``source_addr``,
through the bound session, in the window and at the rate submissions use
(:meth:`appliance.smpp.session.SmppSession.ask`).

Each ``query_sm_resp`` (or ``generic_nack``) is a reply kept raw (content type
``application/vnd.smpp.query-sm-resp``, the PDU byte for byte; ``message_id=...&part=N``
says what was asked); a final one is a report filed under the part's id key, as that
part's receipt would be (:mod:`appliance.smpp.intake`), so the part's state moves by
newer-wins and the message's follows from its parts (:mod:`appliance.reports.aggregate`,
the receipts' rule: final when every part is). The message's verdict:

- ``final`` when every part not final before got a final answer;
- else ``error`` when some part got no readable answer (no answer in
  ``response_timeout_s``, the link lost, a status or ``message_state`` outside SMPP
  3.4, a malformed ``final_date``);
- else ``unknown_id`` when the SMSC does not know some part's id (``ESME_RQUERYFAIL``,
  ``ESME_RINVMSGID``), or a part has no id to ask by;
- else ``pending`` (ENROUTE, ACCEPTED, UNKNOWN).

Only a final answer moves a part; everything else is an attempt. While the session is
not bound the puller does not ask (:meth:`SmppStatusQuery.ready`): the messages stay
due, with no ask counted and no state invented.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import ClassVar

from appliance.config import ProviderSettings
from appliance.providers.callbacks import ParsedReport
from appliance.providers.status_query import (
    PartTarget,
    PullAnswer,
    PullTarget,
    PullVerdict,
    SessionAnswers,
    SessionReply,
    SessionStatusQuery,
)
from appliance.smpp.link import LinkLost, NotWritten
from appliance.smpp.query import CONTENT_TYPE, Said, query_sm, read_answer
from appliance.smpp.transport import SmppTransport
from appliance.states import FINAL_STATES

_VERDICT = {Said.FINAL: PullVerdict.FINAL, Said.PENDING: PullVerdict.PENDING,
            Said.UNKNOWN_ID: PullVerdict.UNKNOWN_ID, Said.ERROR: PullVerdict.ERROR}
# A message's verdict from its parts': the first of these that any part has.
_ORDER = (PullVerdict.ERROR, PullVerdict.UNKNOWN_ID, PullVerdict.PENDING)


def message_verdict(parts: Sequence[PullVerdict]) -> PullVerdict:
    """The message's verdict from the verdicts of the parts asked about (none asked:
    nothing to ask by, ``unknown_id``)."""
    if not parts:
        return PullVerdict.UNKNOWN_ID
    for verdict in _ORDER:
        if verdict in parts:
            return verdict
    return PullVerdict.FINAL


class SmppStatusQuery(SessionStatusQuery):
    """``query_sm`` over one provider's session."""

    kind: ClassVar[str] = "smpp"
    status_batch_max = 1
    asks_per_part = True

    def __init__(self, settings: ProviderSettings, transport: SmppTransport,
                 now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self.name = settings.name
        self.transport = transport
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms()

    def ready(self) -> bool:
        return self.transport.session.is_bound

    async def ask(self, targets: Sequence[PullTarget]) -> SessionAnswers:
        replies: list[SessionReply] = []
        verdicts: dict[str, PullVerdict] = {}
        for target in targets:
            said: list[PullVerdict] = []
            for part in target.parts:
                if part.state in FINAL_STATES:
                    continue
                reply = None if part.provider_msg_id is None else \
                    await self._ask_part(target, part)
                if reply is None:
                    said.append(PullVerdict.UNKNOWN_ID if part.provider_msg_id is None
                                else PullVerdict.ERROR)
                    continue
                replies.append(reply)
                said.append(reply.answer.verdict(target.ref))
            verdicts[target.ref] = message_verdict(said)
        return SessionAnswers(tuple(replies), verdicts)

    async def _ask_part(self, target: PullTarget, part: PartTarget) -> SessionReply | None:
        """One ``query_sm`` about one part; ``None`` when no answer came."""
        assert part.provider_msg_id is not None
        key = part.provider_msg_id
        session = self.transport.session
        message_id = session.ids.spelling(key)
        source = self.transport.settings.source()
        build = functools.partial(query_sm, message_id=message_id, source_ton=source.ton,
                                  source_npi=source.npi, source_addr=source.addr)
        try:
            frame = await session.ask(build)
        except (NotWritten, ValueError, LinkLost, TimeoutError, OSError):
            return None
        read = read_answer(frame)
        verdict = _VERDICT[read.said]
        reports: tuple[ParsedReport, ...] = ()
        if read.said is Said.FINAL:
            reports = (ParsedReport(ref=None, provider_msg_id=key, status=read.status,
                                    state=read.state, final=True,
                                    reported_at_ms=read.reported_at_ms,
                                    error_code=read.error_code),)
        answer = PullAnswer(reports=reports, verdicts={target.ref: verdict},
                            error=read.why if read.said is Said.ERROR else None)
        return SessionReply(query=f"message_id={message_id}&part={part.part}",
                            content_type=CONTENT_TYPE, body=frame, answer=answer)
