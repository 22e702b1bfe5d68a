"""Infobip SMS API v2: fully featured text send and delivery reports.

Submit: ``POST {base_url}/sms/2/text/advanced`` with ``Authorization: App <api_key>``
and a JSON body of one message, one destination. Our ref travels twice: as the
destination's ``messageId`` (Infobip then uses it as its own id) and as
``callbackData`` (echoed verbatim in every report). The answer lists
``messages[].status`` whose ``groupName`` says whether it was taken. A commercial message
with ``[compliance]`` (:mod:`.iys`) carries ``regional.turkeyIys {brandCode,
recipientType}`` ("IYS regulations specific parameters required for sending promotional
SMS to phone numbers registered in Turkey": ``TurkeyIysOptions`` of Infobip's own
client, ``infobip/infobip-api-java-client``, ``src/main/java/com/infobip/model/
TurkeyIysOptions.java``; ``brandCode`` an integer, the account's default when absent,
``recipientType`` ``TACIR`` or ``BIREYSEL``); a transactional one carries none.

Reports: Infobip POSTs JSON ``{"results": [...]}`` to the per-message ``notifyUrl``, in
batches (up to 100 by default). Infobip does not sign them, so the callback proves itself
with our shared ``secret``: either as ``?secret=`` in the query (we add it to
``notifyUrl``, option ``secret_in_notify_url``, on by default) or as the password of
HTTP Basic authentication (an authentication setting in Infobip's subscription
management; ``basic_user`` pins the user name). Compared in constant time.

Asked (ROUTE-2) through the sent messages' logs, not the delivery-report pull: Infobip's
``GET /sms/1/logs`` ("Sent messages logs") filters by ``messageId`` (one a request, as
its parameter table gives it) and is not consumed by reading, where a report fetched
from ``/sms/1/reports`` is returned only once (a pull that died after reading it would
lose it). Its results have the pushed reports' shape and are read the same way; an
empty ``results`` is an id Infobip does not know. Logs are kept 48 hours
(``answers_within_s``): the puller's last ask falls before.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from appliance.config import OptionValue
from appliance.states import REPORTED_FINAL_STATES, UNKNOWN_WORD_STATE

from .base import (
    AuthError,
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    InboundReader,
    Outcome,
    OutgoingMessage,
    ParsedReport,
    ProviderAdapter,
    ReportParseError,
    SubmitResult,
    load_json,
    parse_form,
    parse_iso_ms,
    report,
    secrets_equal,
    short,
    unique_params,
)
from .http_kind import http_kind
from .inbound import text_field
from .iys import Iys
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery
from .validity_fields import MINUTES_48H_S, minutes

# Submit answer status groups that mean "taken".
ACCEPTED_GROUPS = frozenset({"PENDING", "ACCEPTED", "DELIVERED"})
# Rejections at submit that clear once the operator acts (top up): not permanent.
TRANSIENT_REJECTIONS = frozenset({"REJECTED_NOT_ENOUGH_CREDITS"})

# Report status group -> our state. DELIVERED_TO_OPERATOR sits in Infobip's DELIVERED
# group but only says the operator took it: intermediate unless configured otherwise.
GROUP_STATES = {
    "PENDING": "ENROUTE",
    "DELIVERED": "DELIVERED",
    "UNDELIVERABLE": "FAILED",
    "EXPIRED": "EXPIRED",
    "REJECTED": "REJECTED",
}

def turkey_iys(iys: Iys) -> dict[str, Any]:
    """``regional.turkeyIys`` of a commercial message: its ``recipientType`` and the
    brand's ``brandCode`` (an integer; left out when ``[compliance] iys_brand_code`` is
    empty or not a number: Infobip then uses the account's default)."""
    out: dict[str, Any] = {"recipientType": iys.recipient_type}
    if iys.brand_code.isdigit():
        out["brandCode"] = int(iys.brand_code)
    return out


class InfobipAdapter(ProviderAdapter, StatusQuery):
    """Infobip SMS API (``kind = "infobip"``).

    Options: ``secret_in_notify_url`` (bool, default true): append ``?secret=`` to
    ``notifyUrl``; ``basic_user`` (str, default ""): the user name HTTP Basic must carry
    (any when empty); ``intermediate_reports`` (bool, default false): ask for PENDING
    reports too; ``operator_delivery_final`` (bool, default false): treat
    ``DELIVERED_TO_OPERATOR`` as final DELIVERED, for routes that never report further.
    """

    kind = "infobip"
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "api_key": "",
        "secret": "",
        "secret_in_notify_url": True,
        "basic_user": "",
        "intermediate_reports": False,
        "operator_delivery_final": False,
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"api_key", "secret"})
    answers_within_s: float | None = 48 * 3600.0  # "logs ... for the last 48 hours"

    def _check_settings(self) -> None:
        self._require("base_url", "api_key", "secret")

    # -- submission --------------------------------------------------------------------

    def notify_url(self, msg: OutgoingMessage) -> str:
        if not self.option_bool("secret_in_notify_url"):
            return msg.callback_url
        sep = "&" if "?" in msg.callback_url else "?"
        return f"{msg.callback_url}{sep}secret={quote(self.option_str('secret'), safe='')}"

    def request_body(self, msg: OutgoingMessage) -> dict[str, Any]:
        message: dict[str, Any] = {
            "destinations": [{"to": msg.msisdn.removeprefix("+"), "messageId": msg.ref}],
            "from": self.settings.sender,
            "text": msg.body,
            "notifyUrl": self.notify_url(msg),
            "notifyContentType": "application/json",
            "callbackData": msg.ref,
        }
        if self.option_bool("intermediate_reports"):
            message["intermediateReport"] = True
        if msg.iys is not None and msg.iys.commercial:
            message["regional"] = {"turkeyIys": turkey_iys(msg.iys)}
        if msg.validity_s is not None:  # ROUTE-4: in minutes (validity_fields)
            message["validityPeriod"] = minutes(msg.validity_s)
        return {"messages": [message]}

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        return httpx.Request(
            "POST",
            self.endpoint("/sms/2/text/advanced"),
            json=self.request_body(msg),
            headers={
                "Authorization": f"App {self.option_str('api_key')}",
                "Accept": "application/json",
            },
        )

    def interpret_response(self, response: httpx.Response) -> Outcome:
        if not 200 <= response.status_code < 300:
            return self.http_outcome(response, _request_error(response)) or Outcome(
                SubmitResult.UNCERTAIN
            )
        try:
            data = load_json(response.content)
            entry = data["messages"][0]
            status = entry["status"]
            group = status["groupName"]
            name = status.get("name", "")
            if not isinstance(group, str) or not isinstance(name, str):
                raise TypeError("status is not text")
            msg_id = entry.get("messageId")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            return Outcome(
                SubmitResult.UNCERTAIN,
                error=f"infobip: unreadable {response.status_code} answer",
            )
        provider_id = msg_id if isinstance(msg_id, str) and msg_id else None
        if group in ACCEPTED_GROUPS:
            return Outcome(SubmitResult.ACCEPTED, provider_msg_id=provider_id)
        text = short(f"infobip {group} {name}".strip())
        if name in TRANSIENT_REJECTIONS:
            return Outcome(SubmitResult.RETRY, retry_after_s=60.0, error=text)
        if group in ("REJECTED", "UNDELIVERABLE", "EXPIRED"):
            return Outcome(SubmitResult.REJECTED, provider_msg_id=provider_id, error=text)
        return Outcome(SubmitResult.UNCERTAIN, provider_msg_id=provider_id, error=text)

    # -- status query ------------------------------------------------------------------

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        target = targets[0]  # our ref is the messageId we gave (request_body)
        return httpx.Request(
            "GET", self.endpoint("/sms/1/logs"),
            params={"messageId": target.provider_msg_id or target.ref},
            headers={"Authorization": f"App {self.option_str('api_key')}",
                     "Accept": "application/json"},
        )

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        target = targets[0]
        data = load_json(answer.body)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            return PullAnswer.failed('infobip status: the answer is not {"results": [...]}')
        ids = {target.ref, target.provider_msg_id}
        mine = [item for item in data["results"]
                if isinstance(item, dict) and item.get("messageId") in ids]
        if not mine:
            return PullAnswer(verdicts={target.ref: PullVerdict.UNKNOWN_ID})
        status = mine[-1].get("status")
        group = status.get("groupName") if isinstance(status, dict) else None
        if group not in GROUP_STATES:  # not one of Infobip's status groups: no verdict
            return PullAnswer(verdicts={target.ref: PullVerdict.ERROR},
                              error=short(f"infobip status: unknown status group {group!r}"))
        found = self._one(mine[-1])
        if found.state not in REPORTED_FINAL_STATES:
            return PullAnswer(verdicts={target.ref: PullVerdict.PENDING})
        pulled = report(ref=target.ref, provider_msg_id=found.provider_msg_id,
                        status=found.status, state=found.state,
                        reported_at_ms=found.reported_at_ms, error_code=found.error_code)
        return PullAnswer(reports=(pulled,), verdicts={target.ref: PullVerdict.FINAL})

    # -- callbacks ---------------------------------------------------------------------

    def _verify(self, req: CallbackRequest) -> None:
        secret = self.option_str("secret")
        if not secret:
            raise AuthError("infobip: no secret configured")
        query = unique_params(parse_form(req.query)) if req.query else {}
        given = query.get("secret")
        if given is not None and secrets_equal(given, secret):
            return
        user, password = _basic_credentials(req.headers)
        if password is not None and secrets_equal(password, secret):
            want_user = self.option_str("basic_user")
            if not want_user or secrets_equal(user or "", want_user):
                return
        raise AuthError("infobip: shared secret missing or wrong")

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        data = load_json(req.body)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ReportParseError('infobip: body is not {"results": [...]}')
        return [self._one(item) for item in data["results"]]

    def _one(self, item: object) -> ParsedReport:
        if not isinstance(item, dict):
            raise ReportParseError("infobip: a result is not an object")
        msg_id = _text(item, "messageId")
        ref = _text(item, "callbackData") or msg_id
        status = item.get("status")
        if not isinstance(status, dict):
            raise ReportParseError("infobip: result without a status object")
        group = _text(status, "groupName")
        name = _text(status, "name")
        if not group:
            raise ReportParseError("infobip: status without groupName")
        if ref is None:
            raise ReportParseError("infobip: result with neither callbackData nor messageId")
        operator_only = name == "DELIVERED_TO_OPERATOR" and not self.option_bool(
            "operator_delivery_final"
        )
        if operator_only or name == "PENDING_ACCEPTED":
            state = "ACCEPTED"
        else:
            state = GROUP_STATES.get(group, UNKNOWN_WORD_STATE)
        return report(
            ref=ref,
            provider_msg_id=msg_id,
            status=name or group,
            state=state,
            reported_at_ms=_report_time(item),
            error_code=_error_code(item.get("error")),
        )


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    """A text field: absent or null -> None; present but not text -> parse error."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ReportParseError(f"infobip: {key} is not text")
    return value or None


def _report_time(item: Mapping[str, Any]) -> int:
    """``doneAt``, else ``sentAt`` (ISO 8601 with offset, milliseconds), else 0."""
    for key in ("doneAt", "sentAt"):
        value = item.get(key)
        if isinstance(value, str) and value:
            try:
                return parse_iso_ms(value)
            except ValueError:
                continue
    return 0


def _error_code(error: object) -> str | None:
    """The report's error name (``EC_ABSENT_SUBSCRIBER``...), None for NO_ERROR."""
    if not isinstance(error, dict):
        return None
    code = error.get("id")
    name = error.get("name")
    if code == 0 or name == "NO_ERROR":
        return None
    if isinstance(name, str) and name:
        return name
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    return None


def _request_error(response: httpx.Response) -> str:
    try:
        data = load_json(response.content)
        exc = data["requestError"]["serviceException"]
        parts = [exc.get("messageId"), exc.get("text")]
        return short(" ".join(p for p in parts if isinstance(p, str) and p), 120)
    except (ValueError, KeyError, TypeError, AttributeError):
        return short(response.text, 120)


def _basic_credentials(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "basic" or not token:
        return None, None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None, None
    user, sep, password = decoded.partition(":")
    if not sep:
        return None, None
    return user, password


class InfobipInbound(InboundReader):
    """Infobip's forwarded inbound messages (``results[]``)."""

    reports: InfobipAdapter

    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        data = load_json(req.body)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise InboundParseError('infobip: body is not {"results": [...]}')
        return [self._one(item) for item in data["results"]]

    def _one(self, item: object) -> InboundMessage:
        if not isinstance(item, dict):
            raise InboundParseError("infobip: a result is not an object")
        sender = text_field(item, "from", "infobip")
        msg_id = text_field(item, "messageId", "infobip")
        if not sender or not msg_id:
            raise InboundParseError("infobip: inbound message without from or messageId")
        text = text_field(item, "text", "infobip")
        if text is None:
            text = text_field(item, "cleanText", "infobip")
        stamp = text_field(item, "receivedAt", "infobip")
        try:
            sent_at = parse_iso_ms(stamp) if stamp else 0
        except ValueError:
            sent_at = 0
        return InboundMessage(msisdn=sender, to=text_field(item, "to", "infobip") or "",
                              text=text or "", provider_msg_id=msg_id, sent_at_ms=sent_at)


KIND = http_kind(InfobipAdapter, InfobipInbound, status_query=True,
                 validity_range_s=MINUTES_48H_S)
