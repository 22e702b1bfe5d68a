"""İletimerkezi SMS API v1 (JSON): send an order, ask for its report, read the balance.

The reference is İletimerkezi's own API documentation, the source of its published
pages (repository ``iletimerkezi/apidocs-website``: ``docs/sms/send/json.mdx`` "JSON
Post API", ``docs/sms/report/json.mdx``, ``docs/sms/report/webhook.mdx``,
``docs/account/balance/json.mdx``, ``docs/status-codes.mdx``; English under
``i18n/en/docusaurus-plugin-content-docs/current/``), read beside its official client
libraries ``iletimerkezi/iletimerkezi-python`` (``src/iletimerkezi/services/
sms_service.py``, ``report_service.py``, ``account_service.py``,
``models/webhook_report.py``) and ``iletimerkezi/iletimerkezi-php``
(``src/Services/SmsService.php``, ``src/BaseResponse.php``). The codes are in
:mod:`.iletimerkezi_codes`.

Send: ``POST {base_url}/send-sms/json`` with ``{"request": {"authentication": {"key",
"hash"}, "order": {"sender", "sendDateTime", "iys", "iysList", "message": {"text",
"receipents": {"number": [...]}}}}}`` (the API's own spelling, ``receipents``). One
order carries one text to many numbers (:class:`BatchWireFormat`). ``iys`` says whether
İletimerkezi checks each number's consent in İYS (``"1"``: a commercial message; ``"0"``:
not checked, ``iysList`` then ignored) and ``iysList`` which list (``BIREYSEL`` or
``TACIR``): per message, from its type and its recipient type with ``[compliance]``
(:mod:`.iys`), else from the table's options. The documentation has no brand code field
(the brand is the account's). The answer is
``{"response": {"status": {"code", "message"}, "order": {"id"}}}``; the same code is the
answer's HTTP status. The order id is per request, so a message's provider id is the
pair ``"<order id>:<number>"`` (the number as E.164 digits), recorded with the
submission; the reports carry no ref of ours and are matched by that pair.

Reports: asked for with ``POST {base_url}/get-report/json`` (``order.id``, ``page``,
``rowCount`` up to 1000), answered ``order.message[]`` of ``{"number", "status"}``
(110 being sent, 111 delivered, 112 not delivered) (:class:`StatusQuery`). Where the
account's panel has a webhook URL, İletimerkezi also POSTs ``{"report": {"id",
"packet_id", "status", "to", "body"}}`` (``status``: ``accepted``, ``delivered``,
``undelivered``) to it, unsigned: the URL entered there carries ``?token=`` with the
``callback_token`` (:mod:`.callback_token`). Balance: ``POST {base_url}/get-balance/json``
answers ``balance.amount`` (TL) and ``balance.sms`` (SMS credits)
(:class:`CreditQuery`). The documentation describes no inbound (MO) API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from appliance.config import OptionValue

from .base import (
    CallbackRequest,
    Outcome,
    OutgoingMessage,
    ParsedReport,
    ProviderAdapter,
    ReportParseError,
    SubmitResult,
    load_json,
    report,
    short,
)
from .batch import BatchWireFormat
from .callback_token import CALLBACK_TOKEN, check_callback_token
from .credit import CreditQuery
from .http_kind import http_kind
from .iletimerkezi_codes import (
    MESSAGE_STATUS_WORD,
    OK,
    ORDER_NOT_FOUND,
    ORDER_NOT_YET_DUE,
    code_text,
    report_state,
    send_outcome,
)
from .iys import one_iys
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery

REPORT_ROWS = 1000
"""``rowCount``: the most messages one report page lists (the documented maximum)."""

SENDER_MAX = 11
"""The longest başlık İletimerkezi takes (code 460), in ASCII characters."""


class IletimerkeziAdapter(ProviderAdapter, BatchWireFormat, StatusQuery, CreditQuery):
    """İletimerkezi (``kind = "iletimerkezi"``).

    Options: ``key`` and ``hash`` (the API key and the hash the panel makes of it and
    the secret key: ``authentication.key``/``hash``); ``iys`` (bool, default true:
    İletimerkezi checks each number's İYS consent, as commercial messages require) and
    ``iys_list`` (``BIREYSEL`` or ``TACIR``), for messages without ``[compliance]`` (a
    message with it says its own); ``credit`` (``sms``: the account's SMS
    credits, or ``amount``: its TL balance, as the account is billed);
    ``callback_token`` (the token the webhook URL carries).
    """

    kind = "iletimerkezi"
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "key": "",
        "hash": "",
        "iys": True,
        "iys_list": "BIREYSEL",
        "credit": "sms",
        CALLBACK_TOKEN: "",
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"key", "hash", CALLBACK_TOKEN})
    OPTION_CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "iys_list": ("BIREYSEL", "TACIR"),
        "credit": ("sms", "amount"),
    }
    reports_by_provider_id_only: ClassVar[bool] = True
    status_batch_max = REPORT_ROWS

    def _check_settings(self) -> None:
        self._require("base_url", "key", "hash", "sender")

    def config_problems(self, callback_url: str) -> list[str]:
        problems = super().config_problems(callback_url)
        sender = self.settings.sender
        if len(sender) > SENDER_MAX or not sender.isascii():
            problems.append(f"{self._where('sender')}: İletimerkezi takes a başlık of at most"
                            f" {SENDER_MAX} characters without Turkish letters (code 460)")
        return problems

    def _authentication(self) -> dict[str, str]:
        return {"key": self.option_str("key"), "hash": self.option_str("hash")}

    def _post(self, path: str, request: dict[str, Any]) -> httpx.Request:
        body = {"request": {"authentication": self._authentication(), **request}}
        return httpx.Request("POST", self.endpoint(path), json=body,
                             headers={"Accept": "application/json"})

    # -- send ----------------------------------------------------------------------------

    def build_batch_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        texts = {m.body for m in msgs}
        if len(texts) != 1:
            raise ValueError("an İletimerkezi order carries one text")
        iys = one_iys(m.iys for m in msgs)
        checked = self.option_bool("iys") if iys is None else iys.commercial
        listed = self.option_str("iys_list") if iys is None or not iys.commercial \
            else iys.recipient_type
        order = {
            "sender": self.settings.sender,
            "sendDateTime": "",
            "iys": "1" if checked else "0",
            "iysList": listed,
            "message": {"text": msgs[0].body,
                        "receipents": {"number": [number_of(m.msisdn) for m in msgs]}},
        }
        return self._post("/send-sms/json", {"order": order})

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        return self.build_batch_request([msg])

    def interpret_response(self, response: httpx.Response) -> Outcome:
        numbers = _numbers_sent(response)
        return self._outcomes(numbers, response)[0]

    def _interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                  response: httpx.Response) -> list[Outcome]:
        return self._outcomes([number_of(m.msisdn) for m in msgs], response)

    def _outcomes(self, numbers: list[str], response: httpx.Response) -> list[Outcome]:
        """One outcome per number of the order, in its order."""
        count = max(len(numbers), 1)
        answer = _status(response.content)
        if answer is None:
            return [self._unreadable(response)] * count
        code, said, data = answer
        if code != OK:
            return [send_outcome(code, said, many=count > 1)] * count
        order_id = _order_id(data)
        if order_id is None:
            return [Outcome(SubmitResult.UNCERTAIN,
                            error="iletimerkezi 200 without an order id")] * count
        if not numbers:
            return [Outcome(SubmitResult.ACCEPTED, error=f"order {order_id}: numbers unknown")]
        seen: set[str] = set()
        out: list[Outcome] = []
        for number in numbers:
            if number in seen:  # the same number twice in one order: one id for both
                out.append(Outcome(SubmitResult.UNCERTAIN,
                                   error=f"order {order_id}: {number} twice in the order"))
                continue
            seen.add(number)
            out.append(Outcome(SubmitResult.ACCEPTED, provider_msg_id=f"{order_id}:{number}"))
        return out

    def _unreadable(self, response: httpx.Response) -> Outcome:
        """An answer without İletimerkezi's envelope. An empty one is read by its HTTP
        status as any kind's is (:meth:`http_outcome`). One with a body that is not the
        envelope (an HTML error page, a truncated answer) may come from anything between
        us and the API: a redirect, a 5xx or a 429 is read by its status, anything else
        (a 2xx, another 4xx) may have been taken and is ``UNCERTAIN``, never final."""
        code = response.status_code
        outcome = self.http_outcome(response, "" if not response.content else
                                    "not an İletimerkezi answer")
        if outcome is not None and (not response.content or code < 400 or code >= 500
                                    or code in (408, 425, 429)):
            return outcome
        return Outcome(SubmitResult.UNCERTAIN,
                       error=short(f"iletimerkezi: unreadable http {code} answer"))

    # -- reports pushed to the webhook ---------------------------------------------------

    def _verify(self, req: CallbackRequest) -> None:
        check_callback_token(req, self.option_str(CALLBACK_TOKEN))

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        data = load_json(req.body)
        item = data.get("report") if isinstance(data, dict) else None
        if not isinstance(item, dict):
            raise ReportParseError('iletimerkezi: body is not {"report": {...}}')
        order_id = _scalar(item.get("packet_id"))
        to = _scalar(item.get("to"))
        word = item.get("status")
        if not order_id or not to or not isinstance(word, str) or not word:
            raise ReportParseError("iletimerkezi: report without packet_id, to or status")
        return [report(ref=None, provider_msg_id=f"{order_id}:{number_of(to)}",
                       status=word.lower(), state=report_state(word.lower()),
                       reported_at_ms=0)]

    # -- reports asked for ---------------------------------------------------------------

    def status_batch_key(self, target: PullTarget) -> str:
        """Messages asked about together share an order: its id."""
        return _split_id(target.provider_msg_id)[0]

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        """The report of the first target's order (the targets of another order get no
        verdict from its answer, and are asked about again)."""
        order_id = self.status_batch_key(targets[0])
        if not order_id:
            raise ValueError("a message without an İletimerkezi order id cannot be asked about")
        order = {"id": order_id, "page": 1, "rowCount": REPORT_ROWS}
        return self._post("/get-report/json", {"order": order})

    def read_status_answer(self, targets: Sequence[PullTarget], status_code: int,
                           answer: CallbackRequest) -> PullAnswer:
        """As :meth:`StatusQuery.read_status_answer`, reading İletimerkezi's own code
        whatever the HTTP status (it answers 455 "order not found" as HTTP 455 too)."""
        try:
            if _status(answer.body) is not None:
                return self._read_status_answer(targets, answer)
        except Exception as exc:
            return PullAnswer.failed(f"{type(exc).__name__}: {exc}")
        return super().read_status_answer(targets, status_code, answer)

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        status = _status(answer.body)
        if status is None:
            return PullAnswer.failed("iletimerkezi: unreadable report answer")
        code, said, data = status
        asked = self.status_batch_key(targets[0])
        targets = [t for t in targets if self.status_batch_key(t) == asked]
        if code == ORDER_NOT_FOUND:
            return PullAnswer(verdicts={t.ref: PullVerdict.UNKNOWN_ID for t in targets})
        if code == ORDER_NOT_YET_DUE:
            return PullAnswer(verdicts={t.ref: PullVerdict.PENDING for t in targets})
        if code != OK:
            return PullAnswer.failed(f"{code_text(code)}: {said}" if said else code_text(code))
        order = data.get("order")
        rows = order.get("message") if isinstance(order, dict) else None
        if not isinstance(rows, list):
            return PullAnswer.failed("iletimerkezi: report without order.message")
        listed: dict[str, int] = {}
        for row in rows:
            if isinstance(row, dict) and _scalar(row.get("number")):
                status_code = _code(row.get("status"))
                listed[number_of(_scalar(row.get("number")))] = (
                    -1 if status_code is None else status_code)
        complete = len(rows) < REPORT_ROWS  # every number of the order is on this page
        reports: list[ParsedReport] = []
        verdicts: dict[str, PullVerdict] = {}
        for target in targets:
            order_id, number = _split_id(target.provider_msg_id)
            word = MESSAGE_STATUS_WORD.get(listed.get(number, -1))
            if number not in listed:
                verdicts[target.ref] = PullVerdict.UNKNOWN_ID if complete else PullVerdict.ERROR
            elif word is None:  # a status the documentation does not list
                verdicts[target.ref] = PullVerdict.ERROR
            elif word == "accepted":
                verdicts[target.ref] = PullVerdict.PENDING
            else:
                reports.append(report(ref=None, provider_msg_id=f"{order_id}:{number}",
                                      status=word, state=report_state(word),
                                      reported_at_ms=0))
                verdicts[target.ref] = PullVerdict.FINAL
        return PullAnswer(reports=tuple(reports), verdicts=verdicts)

    # -- credit --------------------------------------------------------------------------

    def build_credit_request(self) -> httpx.Request:
        return self._post("/get-balance/json", {})

    def _read_credit(self, body: bytes, content_type: str) -> float:
        status = _status(body)
        if status is None or status[0] != OK:
            raise ValueError("no balance in the answer")
        balance = status[2]["balance"]
        value = balance[self.option_str("credit")]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError("balance is not a number")
        return float(value)


def number_of(msisdn: str) -> str:
    """A number as E.164 digits: ``+905321234567``, ``905321234567``, ``5321234567``
    (the report's national form) and ``05321234567`` are all ``905321234567``."""
    digits = "".join(c for c in msisdn if c.isdigit())
    if len(digits) == 10 and digits.startswith("5"):
        return "90" + digits
    if len(digits) == 11 and digits.startswith("05"):
        return "9" + digits
    return digits


def _split_id(provider_msg_id: str | None) -> tuple[str, str]:
    """``"<order id>:<number>"`` as its two halves (``("", "")`` when it is not one)."""
    order_id, sep, number = (provider_msg_id or "").partition(":")
    return (order_id, number) if sep and order_id.isdigit() else ("", "")


def _code(value: object) -> int | None:
    """A documented code, given as a number or as text (``200`` or ``"200"``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _scalar(value: object) -> str:
    """An id or a number, given as text or as a JSON number ("" otherwise)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return value.strip() if isinstance(value, str) else ""


def _status(body: bytes) -> tuple[int, str, dict[str, Any]] | None:
    """``(code, message, response)`` from ``{"response": {"status": {...}}}``, or
    ``None`` for anything else (HTML, truncated JSON, another shape)."""
    try:
        data = load_json(body)
    except ValueError:
        return None
    response = data.get("response") if isinstance(data, dict) else None
    status = response.get("status") if isinstance(response, dict) else None
    if not isinstance(response, dict) or not isinstance(status, dict):
        return None
    code = _code(status.get("code"))
    if code is None:
        return None
    said = status.get("message")
    return code, said if isinstance(said, str) else "", response


def _order_id(response: Mapping[str, Any]) -> str | None:
    order = response.get("order")
    order_id = _scalar(order.get("id")) if isinstance(order, dict) else ""
    return order_id if order_id.isdigit() else None


def _numbers_sent(response: httpx.Response) -> list[str]:
    """The numbers of the order this answers, read back from the request we sent."""
    try:
        sent = json.loads(response.request.content)
        numbers = sent["request"]["order"]["message"]["receipents"]["number"]
    except (RuntimeError, ValueError, KeyError, TypeError):
        return []
    return [number_of(n) for n in numbers if isinstance(n, str)]


KIND = http_kind(IletimerkeziAdapter, None, many_per_request=True, status_query=True,
                 requests_per_s=100.0)
"""100 requests a second: the transactional rate İletimerkezi publishes (its official
``iletimerkezi/iletimerkezi-mcp-server`` README, ``send_sms``)."""
