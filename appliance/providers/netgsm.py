"""Netgsm (``kind = "netgsm"``), a Turkish aggregator: send, report query, balance and
inbound query.

Netgsm's documentation (netgsm.com.tr/dokuman) is not among the stored sources, so the
reference is Netgsm's own client library, the ``netgsm/sms`` Composer package
(``src/SmsSend.php`` and ``README.md`` of the ``netgsm/sms`` repository on GitHub), with
the most-used Laravel client, ``tarfin-labs/netgsm`` (``src/Sms/AbstractNetgsmMessage.php``,
``src/Report/NetgsmSmsReport.php``), for the answers' other forms; the codes are in
:mod:`.netgsm_codes`. Each verb names the function of ``SmsSend.php`` it follows:

* send, one message or many numbers for one text (``smsGonder``, "1:n SMS GÖNDERİMİ"):
  :mod:`.netgsm_wire`;
* the report query (``smsSorgulama``, "SMS SORGULAMA"): ``GET {base_url}/sms/report``
  with ``usercode``, ``password``, ``bulkid``, ``type=0`` (one bulk id), ``status=100``
  (every state) and ``version=2``. The answer is one line per number, lines joined by
  ``<br>``: ``<number> <state> <operator> <parts> <dd.mm.yyyy> <HH:MM:SS> <hatakod>``
  (``NetgsmSmsReport`` reads the same with the bulk id first: both are read), or one
  code: ``60`` no record, ``30``, ``70``, ``80`` (at most 10 queries a minute), ``100``
  to ``110`` system errors. Netgsm never pushes a report: asking is the only way;
* the balance (``kredisorgu``): ``POST {base_url}/balance/list/xml``, ``<stip>2</stip>``,
  answered ``00 <credit>`` (the account's money balance, in TL, a decimal comma:
  ``00 2,7``) or ``30``/``70``;
* inbound messages (``gelensms``, "GELEN SMS SORGULAMA"): ``POST {base_url}/sms/receive``
  with ``startdate``/``stopdate`` (``ddMMyyyyHHmm``, at most 30 days apart) and
  ``type=0``, answered ``<number>|<text>|<dd.mm.yyyy HH:MM:SS>`` lines joined by
  ``<br>``, or ``40`` (none), ``30``, ``50``, ``60``, ``70``. Netgsm gives no id for an
  inbound message: the id filed is a digest of its number, time and text, the same in
  every window that lists it.

Times are Türkiye's clock (UTC+03:00). Netgsm signs nothing; it pushes nothing the
appliance reads, but ``/callbacks/NAME`` and ``/inbound/NAME`` of a kind that signs
nothing take a push only with ``?token=<callback_token>``. The reference publishes no
send rate; its report query takes 10 a minute (the kind's ``status_queries_per_s``: the
puller never asks faster).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import httpx

from .callback_token import CALLBACK_TOKEN, check_callback_token
from .callbacks import (
    CallbackRequest,
    InboundMessage,
    ParsedReport,
    ReportParseError,
    report,
)
from .credit import CreditQuery
from .http_kind import http_kind
from .inbound_query import InboundAnswer, InboundQuery
from .iys import iys_report_error
from .netgsm_codes import (
    BALANCE_ERRORS,
    COUNTING,
    INBOUND_QUERY_ERRORS,
    IYS_STATES,
    NO_MESSAGES,
    NO_RECORDS,
    PENDING_STATES,
    REPORT_QUERY_ERRORS,
    REPORT_STATES,
    is_system_error,
    report_error_text,
)
from .netgsm_wire import NetgsmWire, bulk_of, digits_of, provider_id
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery
from .wire_text import decode_utf8

TURKEY = timezone(timedelta(hours=3), "TRT")
REPORT_PATH = "/sms/report"
BALANCE_PATH = "/balance/list/xml"
INBOUND_PATH = "/sms/receive"
LINE_BREAK = re.compile(r"<br\s*/?>|\r?\n", re.IGNORECASE)
DATE = re.compile(r"\d{2}\.\d{2}\.\d{4}")
CLOCK = re.compile(r"\d{2}:\d{2}(:\d{2})?")
NO_BULK = "0"  # the reference's bulk id when there is none


def turkey_time_ms(date: str, clock: str) -> int:
    """``dd.mm.yyyy`` and ``HH:MM[:SS]`` on Türkiye's clock as epoch ms; 0 when
    unreadable."""
    fmt = "%d.%m.%Y %H:%M:%S" if clock.count(":") == 2 else "%d.%m.%Y %H:%M"
    try:
        stamp = datetime.strptime(f"{date} {clock}", fmt).replace(tzinfo=TURKEY)
    except ValueError:
        return 0
    return int(stamp.timestamp() * 1000)


def netgsm_minute(ms: int) -> str:
    """Epoch ms as the reference's ``ddMMyyyyHHmm`` on Türkiye's clock."""
    return datetime.fromtimestamp(ms / 1000, TURKEY).strftime("%d%m%Y%H%M")


def one_code(text: str) -> str | None:
    """The code of a one-code answer (``60``, ``30``...), ``None`` for anything else."""
    word = text.strip()
    return word if word.isdigit() and len(word) <= 3 else None


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in LINE_BREAK.split(text) if line.strip()]


def parse_amount(text: str) -> float:
    """A balance as Netgsm writes it (``2,7``, ``1.234,56``, ``12.5``) as a number."""
    value = text.strip()
    if "," in value:
        value = value.replace(".", "").replace(",", ".")
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("not a number")
    return number


class NetgsmAdapter(NetgsmWire, StatusQuery, CreditQuery, InboundQuery):
    """Netgsm: send (one or many), report query, balance and inbound query."""

    kind = "netgsm"
    # One query names one bulk id and lists every number of it.
    status_batch_max: int = 1000
    inbound_window_max_s: float = 30 * 86_400.0  # gelensms: dates at most 30 days apart
    # The reference: reports can be queried "son 3 aya kadar" (up to three months back).
    answers_within_s: float | None = 90 * 86400.0

    def status_batch_key(self, target: PullTarget) -> str:
        return bulk_of(target.provider_msg_id) or f"ref:{target.ref}"

    # -- the report query --------------------------------------------------------------

    def asked(self, targets: Sequence[PullTarget]) -> list[PullTarget]:
        """The targets one query asks about: those of the first one's bulk id. A message
        with no bulk id (its send answer was never read) cannot be named: asked alone."""
        first = bulk_of(targets[0].provider_msg_id)
        if first is None:
            return [targets[0]]
        return [t for t in targets if bulk_of(t.provider_msg_id) == first][
            :self.status_batch_max]

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        bulk = bulk_of(self.asked(targets)[0].provider_msg_id) or NO_BULK
        params = {"usercode": self.option_str("usercode"),
                  "password": self.option_str("password"),
                  "bulkid": bulk, "type": "0", "status": "100", "version": "2"}
        return httpx.Request("GET", self.endpoint(REPORT_PATH), params=params)

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        these = self.asked(targets)
        bulk = bulk_of(these[0].provider_msg_id)
        text = decode_utf8(answer.body)
        code = one_code(text)
        if code is not None:
            if code == NO_RECORDS:
                return PullAnswer(verdicts={t.ref: PullVerdict.UNKNOWN_ID for t in these})
            meaning = REPORT_QUERY_ERRORS.get(code) or (
                "system error" if is_system_error(code) else "undocumented answer")
            return PullAnswer.failed(f"{self.kind} report {code}: {meaning}")
        if bulk is None:  # nothing the answer lists can be proven to be this message
            return PullAnswer(verdicts={these[0].ref: PullVerdict.UNKNOWN_ID})
        rows: list[list[str]] = []
        for line in lines_of(text):
            words = line.split()
            if len(words) == 8:  # the bulk id first (a query by several bulk ids)
                if words[0] != bulk:
                    continue
                words = words[1:]
            if len(words) != 7 or not _well_formed(words):
                return PullAnswer.failed(f"{self.kind} report: unreadable line: {line[:80]}")
            rows.append(words)
        # A number twice in one task (two lines, or two messages asked about) cannot
        # say which line is which message: nothing is made of it.
        seen = Counter(digits_of(words[0]) for words in rows)
        seen.update(digits_of(t.msisdn) for t in these)
        by_number = {digits_of(t.msisdn): t for t in these}
        verdicts = {t.ref: PullVerdict.UNKNOWN_ID for t in these}
        for t in these:
            if seen[digits_of(t.msisdn)] > 2:
                verdicts[t.ref] = PullVerdict.ERROR
        reports: list[ParsedReport] = []
        for number, state_code, _operator, _parts, date, clock, error in rows:
            target = by_number.get(digits_of(number))
            if target is None or verdicts[target.ref] is PullVerdict.ERROR:
                continue  # another number of the task, or one that is ambiguous
            known = REPORT_STATES.get(state_code)
            if known is None:  # not in the reference: nothing made up
                verdicts[target.ref] = PullVerdict.ERROR
                continue
            if state_code in PENDING_STATES:
                verdicts[target.ref] = PullVerdict.PENDING
                continue
            state, meaning = known
            reports.append(report(
                ref=target.ref,
                provider_msg_id=provider_id(bulk, number),
                status=state_code,
                state=state,
                reported_at_ms=turkey_time_ms(date, clock),
                error_code=_report_error(state, state_code, meaning, error),
            ))
            verdicts[target.ref] = PullVerdict.FINAL
        return PullAnswer(reports=tuple(reports), verdicts=verdicts)

    # -- the balance -------------------------------------------------------------------

    def build_credit_request(self) -> httpx.Request:
        body = ('<?xml version="1.0"?><mainbody><header>'
                f"{self.credentials_xml()}<stip>2</stip></header></mainbody>")
        return httpx.Request("POST", self.endpoint(BALANCE_PATH), content=body.encode(),
                             headers={"Content-Type": "text/xml; charset=UTF-8"})

    def _read_credit(self, body: bytes, content_type: str) -> float:
        words = decode_utf8(body).split()
        if len(words) != 2 or words[0] != "00":
            code = words[0] if words else ""
            raise ValueError(BALANCE_ERRORS.get(code, f"not a balance: {code[:20]!r}"))
        return parse_amount(words[1])

    # -- inbound messages --------------------------------------------------------------

    def build_inbound_request(self, since_ms: int, until_ms: int) -> httpx.Request:
        body = ('<?xml version="1.0" encoding="UTF-8"?><mainbody><header>'
                f"{self.credentials_xml()}"
                f"<startdate>{netgsm_minute(since_ms)}</startdate>"
                f"<stopdate>{netgsm_minute(until_ms)}</stopdate>"
                "<type>0</type></header></mainbody>")
        return httpx.Request("POST", self.endpoint(INBOUND_PATH), content=body.encode(),
                             headers={"Content-Type": "text/xml; charset=UTF-8"})

    def _read_inbound_answer(self, answer: CallbackRequest) -> InboundAnswer:
        text = decode_utf8(answer.body)
        code = one_code(text)
        if code == NO_MESSAGES:
            return InboundAnswer()
        if code is not None:
            meaning = INBOUND_QUERY_ERRORS.get(code, "undocumented answer")
            return InboundAnswer.failed(f"{self.kind} inbound {code}: {meaning}")
        out = []
        for line in lines_of(text):
            sender, sep, rest = line.partition("|")
            body, sep2, stamp = rest.rpartition("|")
            date, _, clock = stamp.strip().partition(" ")
            if not sep or not sep2 or not sender.strip() or not DATE.fullmatch(date) \
                    or not CLOCK.fullmatch(clock):
                return InboundAnswer.failed(f"{self.kind} inbound: unreadable line:"
                                            f" {line[:80]}")
            digest = hashlib.sha256(line.encode("utf-8")).hexdigest()[:24]
            out.append(InboundMessage(msisdn="+" + digits_of(sender), to=self.settings.sender,
                                      text=body, provider_msg_id=f"netgsm-{digest}",
                                      sent_at_ms=turkey_time_ms(date, clock)))
        return InboundAnswer(messages=tuple(out))

    # -- pushes ------------------------------------------------------------------------

    def _verify(self, req: CallbackRequest) -> None:
        check_callback_token(req, self.option_str(CALLBACK_TOKEN))

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        raise ReportParseError(f"{self.kind} pushes no delivery reports: they are asked"
                               " for (the report query)")


def _well_formed(words: list[str]) -> bool:
    number, state, operator, parts, date, clock, error = words
    return (number.lstrip("+").isdigit() and state.isdigit() and operator.isdigit()
            and parts.isdigit() and bool(DATE.fullmatch(date))
            and bool(CLOCK.fullmatch(clock)) and error.isdigit())


def _report_error(state: str, code: str, meaning: str, error: str) -> str | None:
    """The error kept with a report: the operator's ``hatakod``, else what the state
    says for a message that did not arrive; İYS named for its refusals."""
    if state == "DELIVERED":
        return None
    text = report_error_text(error) or f"{code} {meaning}"
    return iys_report_error(text) if code in IYS_STATES else text


STATUS_QUERIES_PER_MIN = 10  # the reference: code 80 past 10 report queries a minute

KIND = http_kind(NetgsmAdapter, None, many_per_request=True, status_query=True,
                 inbound_query=True, counting=COUNTING,
                 status_queries_per_s=STATUS_QUERIES_PER_MIN / 60)
