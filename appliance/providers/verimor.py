"""Verimor SMS API v2 (``kind = "verimor"``), a Turkish aggregator.

Reference: Verimor's API guide, "VERİMOR SMS API DÖKÜMANI" (``user_guide.md`` in the
``verimor/SMS-API`` repository on GitHub; the same text is published at
developer.verimor.com.tr/smsapi). Each verb names the guide's section it follows:

* send, one message or many numbers for one text, and the answer ("SMS GÖNDERİMİ
  (POST)", "HATA KODLARI"), and the report push ("GÖNDERİM RAPORU ALIMI"):
  :mod:`.verimor_wire`; the guide's tables of words: :mod:`.verimor_codes`;
* the status pull ("HTTP GET ile Gönderim Raporu Alımı"): ``GET {base_url}/v2/status``
  with ``username``, ``password``, the campaign's ``id`` (or our ``custom_id``) and
  ``dest``, the numbers asked about; the answer is a JSON array of the push's entries
  (up to 100 a query); ``404`` "Bu idye sahip kampanya bulunamadı" when the campaign is
  unknown. The guide limits these queries to 20 a minute;
* the balance ("SMS KALAN KREDİ SORGULAMA"): ``GET {base_url}/v2/balance`` with
  ``username`` and ``password``, answered with the credit as plain text (``123``);
* inbound messages ("GELEN SMS ALIMI", "PUSH ile Gelen SMS Alımı"): a JSON array of
  ``{"message_id", "type": "inbound", "created_at", "network", "source_addr",
  "destination_addr", "keyword", "content", "received_at"}`` POSTed to the one URL of
  the panel, the reports' URL: taken at ``/callbacks/NAME`` beside the reports, and at
  ``/inbound/NAME``, proven by the same ``callback_token``.

The guide's limits ("GENEL NOTLAR"): 240 send requests a minute, 20 status queries a
minute, 50,000 messages and 10 MB a request; over the rate, ``429``. The kind's
published rate (``requests_per_s``) is 2.5 a second, sends and pulls together, and its
status queries (``status_queries_per_s``) 20 a minute: the puller never asks faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import httpx

from .callbacks import CallbackRequest, InboundMessage, InboundParseError, InboundReader
from .credit import CreditQuery
from .http_kind import http_kind
from .inbound import text_field
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery
from .validity_fields import MINUTES_48H_S
from .verimor_codes import COUNTING, PENDING_STATES, REPORT_STATES
from .verimor_wire import (
    VerimorWire,
    dest_of,
    digits_of,
    entry_type,
    provider_id,
    verimor_time_ms,
)
from .wire_text import decode_utf8, load_json

STATUS_PATH = "/v2/status"
BALANCE_PATH = "/v2/balance"
STATUS_QUERY_MAX = 100  # the guide: "this query returns 100 messages"


def campaign_of(target: PullTarget) -> str | None:
    """The campaign a message went out in, from the provider id its send recorded."""
    pid = target.provider_msg_id or ""
    campaign = pid.split(":", 1)[0]
    return campaign if campaign.isdigit() else None


def asked(targets: Sequence[PullTarget]) -> list[PullTarget]:
    """The targets one status query asks about: those of the first one's campaign (a
    query names one campaign). A message whose send answer was lost has no campaign: it
    is asked about alone, by its ref (the ``custom_id`` of a one-message send)."""
    first = campaign_of(targets[0])
    if first is None:
        return [targets[0]]
    return [t for t in targets if campaign_of(t) == first][:STATUS_QUERY_MAX]


class VerimorAdapter(VerimorWire, StatusQuery, CreditQuery):
    """Verimor: send (one or many), report push, status pull and balance."""

    kind = "verimor"
    status_batch_max: int = STATUS_QUERY_MAX

    def status_batch_key(self, target: PullTarget) -> str:
        return campaign_of(target) or f"ref:{target.ref}"

    # -- status pull -------------------------------------------------------------------

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        these = asked(targets)
        campaign = campaign_of(these[0])
        params: dict[str, str] = dict(self.credentials())
        if campaign is None:
            params["custom_id"] = these[0].ref
        else:
            params["id"] = campaign
        params["dest"] = ",".join(dest_of(t.msisdn) for t in these)
        return httpx.Request("GET", self.endpoint(STATUS_PATH), params=params,
                             headers={"Accept": "application/json"})

    def read_status_answer(self, targets: Sequence[PullTarget], status_code: int,
                           answer: CallbackRequest) -> PullAnswer:
        if status_code == 404 and targets:  # the guide: no campaign with this id
            return PullAnswer(verdicts={t.ref: PullVerdict.UNKNOWN_ID for t in asked(targets)})
        return super().read_status_answer(targets, status_code, answer)

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        data = load_json(answer.body)
        if not isinstance(data, list):
            return PullAnswer.failed(f"{self.kind} status: answer is not a JSON array")
        these = asked(targets)
        by_ref = {t.ref: t for t in these}
        by_pid: dict[str, PullTarget] = {}
        for t in these:
            campaign = campaign_of(t)
            if campaign is not None:
                by_pid[provider_id(campaign, t.msisdn)] = t
        reports = []
        verdicts = {t.ref: PullVerdict.UNKNOWN_ID for t in these}
        for item in data:
            if not isinstance(item, dict):
                return PullAnswer.failed(f"{self.kind} status: an entry is not an object")
            found = self._target_of(item, by_ref, by_pid, these)
            if found is None:
                continue  # another message of the campaign
            status = str(item.get("status") or "")
            if status not in REPORT_STATES:  # not in the guide: nothing made up
                verdicts[found.ref] = PullVerdict.ERROR
                continue
            one = self.report_of({**item, "message_custom_id": found.ref})
            reports.append(one)
            pending = status in PENDING_STATES or not one.final
            verdicts[found.ref] = PullVerdict.PENDING if pending else PullVerdict.FINAL
        return PullAnswer(reports=tuple(reports), verdicts=verdicts)

    @staticmethod
    def _target_of(item: dict[str, Any], by_ref: dict[str, PullTarget],
                   by_pid: dict[str, PullTarget],
                   these: Sequence[PullTarget]) -> PullTarget | None:
        ref = item.get("message_custom_id")
        if isinstance(ref, str) and ref in by_ref:
            return by_ref[ref]
        campaign, dest = item.get("campaign_id"), item.get("dest")
        if isinstance(dest, str) and isinstance(campaign, str | int):
            pid = provider_id(str(campaign), dest)
            if pid in by_pid:
                return by_pid[pid]
            if len(these) == 1 and campaign_of(these[0]) is None \
                    and digits_of(dest) == these[0].msisdn.removeprefix("+"):
                return these[0]  # asked by custom_id: the one message of its campaign
        return None

    # -- balance -----------------------------------------------------------------------

    def build_credit_request(self) -> httpx.Request:
        return httpx.Request("GET", self.endpoint(BALANCE_PATH), params=self.credentials())

    def _read_credit(self, body: bytes, content_type: str) -> float:
        text = decode_utf8(body).strip()
        value = float(text)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a number")
        return value


class VerimorInbound(InboundReader):
    """Verimor's inbound push (a JSON array; the entries of ``"type": "inbound"``, or
    without a type as its ``/v2/inbound_messages`` answer writes them). Verimor's panel
    has one push URL for reports and inbound messages: both are taken at
    ``/callbacks/NAME`` (and inbound messages at ``/inbound/NAME`` too)."""

    reports: VerimorAdapter
    at_report_url: ClassVar[bool] = True

    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        data = load_json(req.body)
        if not isinstance(data, list):
            raise InboundParseError(f"{self.kind}: body is not a JSON array")
        out = []
        for item in data:
            if not isinstance(item, dict):
                raise InboundParseError(f"{self.kind}: an entry is not an object")
            if entry_type(item) != "inbound":
                continue  # a delivery report pushed to the same URL
            out.append(self._one(item))
        return out

    def _one(self, item: dict[str, Any]) -> InboundMessage:
        sender = text_field(item, "source_addr", self.kind)
        msg_id = text_field(item, "message_id", self.kind)
        if not sender or not msg_id:
            raise InboundParseError(f"{self.kind}: inbound message without source_addr"
                                    " or message_id")
        stamp = item.get("received_at") or item.get("created_at")
        return InboundMessage(msisdn=sender,
                              to=text_field(item, "destination_addr", self.kind) or "",
                              text=text_field(item, "content", self.kind) or "",
                              provider_msg_id=msg_id, sent_at_ms=verimor_time_ms(stamp))


STATUS_QUERIES_PER_MIN = 20  # "GENEL NOTLAR": 20 status queries a minute

KIND = http_kind(VerimorAdapter, VerimorInbound, many_per_request=True, status_query=True,
                 validity_range_s=MINUTES_48H_S,
                 counting=COUNTING, requests_per_s=2.5,
                 status_queries_per_s=STATUS_QUERIES_PER_MIN / 60)
