"""Verimor's send request and answer, one message or many, and its report push.

The reference is Verimor's API guide ("VERİMOR SMS API DÖKÜMANI", ``user_guide.md`` of
``verimor/SMS-API``; the same text at developer.verimor.com.tr/smsapi); each part below
names its section. The words of its tables are in :mod:`.verimor_codes`; the kind, the
status pull, the balance and inbound messages in :mod:`.verimor`.

**Send** ("SMS GÖNDERİMİ (POST)"): ``POST {base_url}/v2/send.json``, a JSON object with
``username``, ``password``, ``source_addr`` (the başlık: ``sender``), ``datacoding``
(0, 1 Turkish, 2 Unicode: the encoding decided at acceptance), and ``messages``, a list
of ``{"msg", "dest", "id"}``. One message a request, or many numbers for one text in one
``messages[]`` entry: ``dest`` the numbers joined by commas, ``id`` as many ids of ours
joined the same way (the guide: "as many ids as numbers, else ignored"). Our ref is the
message's ``id``, which every report echoes as ``message_custom_id``; a one-message
request also gives it as the campaign's ``custom_id``, so it can be asked about even when
the send's answer was lost. Numbers go as the guide writes them: ``905311234567`` for
Türkiye, ``00`` and the country code abroad. With ``[compliance]`` (:mod:`.iys`) a
message says whether it is commercial, ``is_commercial`` (true or false), and a
commercial one its ``iys_recipient_type`` (``BIREYSEL`` or ``TACIR``), which the guide
requires for commercial sends; without it neither is sent, as before. The guide has no
brand code field: it is the sender header's, set in the panel (``MISSING_IYS_BRAND_CODE``
otherwise).

**Answer**: ``200`` and the campaign id as plain text (``20212``); a refusal is ``400``
and one word of the guide's table as the body ("HATA KODLARI"), or ``401`` with a text
for the credentials or an address not allow-listed ("Hesabınızda izinli IP ayarları
yapılmamış", the guide's introduction). The campaign id alone does not name a message,
so the provider id recorded is ``"<campaign id>:<number>"`` (the number as E.164
digits); a report names the same pair.

**Report push** ("GÖNDERİM RAPORU ALIMI", "PUSH ile Gönderim Raporu Alımı"): a JSON
array POSTed to the one URL set in Verimor's panel (OİM, SMS settings), each entry
``{"type": "outbound", "campaign_id", "campaign_custom_id", "message_id",
"message_custom_id", "dest", "size", "international_multiplier", "credits", "status",
"gsm_error", "sent_at", "done_at"}``. Times are Türkiye's clock without an offset
(``2015-02-20 16:06:00``, read as UTC+03:00) or ISO 8601 with one. Verimor expects
``200 OK`` and, without it, tries three more times five minutes apart, then never
again: a report lost then is found only by asking (``/v2/status``, :mod:`.verimor`).
Inbound messages arrive at the same URL as ``"type": "inbound"`` entries: the report
reader leaves them to the inbound reader. Verimor signs nothing: a push proves itself
with ``?token=<callback_token>`` in the URL entered in the panel
(:mod:`.callback_token`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

import httpx

from appliance.config import OptionValue
from appliance.states import UNKNOWN_WORD_STATE

from .adapter import ProviderAdapter
from .batch import BatchWireFormat, batch_validity_s
from .callback_token import CALLBACK_TOKEN, check_callback_token
from .callbacks import CallbackRequest, ParsedReport, ReportParseError, report
from .iys import IYS_ERROR, iys_report_error, one_iys
from .outcome import Outcome, OutgoingMessage, SubmitResult, blocked, short
from .validity_fields import hours_minutes
from .verimor_codes import (
    DATACODING,
    IP_NOT_ALLOWED_MARK,
    IYS_SEND_ERRORS,
    IYS_STATES,
    REPORT_STATES,
    SEND_ERRORS,
    SendVerdict,
    gsm_error_text,
)
from .wire_text import load_json

TURKEY = timezone(timedelta(hours=3), "TRT")
"""Türkiye's clock (UTC+03:00 all year since 2016): the zone of a time Verimor writes
without an offset."""

SEND_PATH = "/v2/send.json"
NATIONAL_PREFIX = "+90"


def dest_of(msisdn: str) -> str:
    """A number as the guide writes it: ``90…`` for Türkiye, ``00…`` abroad."""
    digits = msisdn.removeprefix("+")
    return digits if msisdn.startswith(NATIONAL_PREFIX) else "00" + digits


def digits_of(dest: str) -> str:
    """A number Verimor wrote (``905…``, ``0049…``, ``+49…``) as E.164 digits."""
    text = dest.strip()
    if text.startswith("+"):
        return text[1:]
    if text.startswith("00"):
        return text[2:]
    return text


def provider_id(campaign_id: str, number: str) -> str:
    """The provider id of one message: its campaign and its number (E.164 digits)."""
    return f"{campaign_id}:{digits_of(number)}"


def verimor_time_ms(value: object) -> int:
    """A Verimor time as epoch ms: ``YYYY-MM-DD HH:MM:SS`` on Türkiye's clock, or ISO 8601
    with an offset; 0 when absent or unreadable."""
    if not isinstance(value, str) or not value.strip():
        return 0
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        return 0
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=TURKEY)
    return int(stamp.timestamp() * 1000)


def answer_text(response: httpx.Response, limit: int = 120) -> str:
    """The answer's body as one short line (it is plain text; anything else is cut)."""
    return short(response.content.decode("utf-8", "replace"), limit)


class VerimorWire(ProviderAdapter, BatchWireFormat):
    """Verimor's send request and answer (one message or many), and its report push.

    Options: ``username`` and ``password`` (the API password set in Verimor's panel),
    ``callback_token`` (the token a push must carry in its URL), ``sent_final`` (bool,
    default true: ``SENT``, "delivered, unconfirmed by the operator", is final
    ``DELIVERED``; false keeps it intermediate, and the message ends ``UNKNOWN`` at the
    cut-off unless a later answer says more).
    """

    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "username": "",
        "password": "",
        CALLBACK_TOKEN: "",
        "sent_final": True,
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"password", CALLBACK_TOKEN})

    def _check_settings(self) -> None:
        self._require("base_url", "username", "password")

    def credentials(self) -> dict[str, str]:
        return {"username": self.option_str("username"),
                "password": self.option_str("password")}

    # -- send --------------------------------------------------------------------------

    def send_body(self, msgs: Sequence[OutgoingMessage]) -> dict[str, Any]:
        """The ``send.json`` body for ``msgs``, one text (one message, or a batch)."""
        first = msgs[0]
        body: dict[str, Any] = {
            **self.credentials(),
            "source_addr": self.settings.sender,
            "datacoding": DATACODING.get(first.encoding, "0"),
            "messages": [{
                "msg": first.body,
                "dest": ",".join(dest_of(m.msisdn) for m in msgs),
                "id": ",".join(m.ref for m in msgs),
            }],
        }
        if len(msgs) == 1:
            body["custom_id"] = first.ref
        validity = batch_validity_s(msgs)  # ROUTE-4: one for the request, the shortest
        if validity is not None:
            body["valid_for"] = hours_minutes(validity)
        iys = one_iys(m.iys for m in msgs)
        if iys is not None:
            body["is_commercial"] = iys.commercial
            if iys.commercial:
                body["iys_recipient_type"] = iys.recipient_type
        return body

    def _send_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        return httpx.Request("POST", self.endpoint(SEND_PATH), json=self.send_body(msgs),
                             headers={"Accept": "*/*"})

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        return self._send_request([msg])

    def build_batch_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        texts = {(m.body, m.encoding) for m in msgs}
        if len(texts) != 1:
            raise ValueError("a batch holds messages of one text and one encoding")
        return self._send_request(msgs)

    def interpret_response(self, response: httpx.Response) -> Outcome:
        return self._outcomes([_asked_number(response)], response)[0]

    def _interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                  response: httpx.Response) -> list[Outcome]:
        return self._outcomes([m.msisdn for m in msgs], response)

    def _outcomes(self, numbers: Sequence[str | None],
                  response: httpx.Response) -> list[Outcome]:
        """One outcome per number asked (``None``: a number not known here, the id is then
        the campaign's alone)."""
        code = response.status_code
        text = answer_text(response)
        if 200 <= code < 300:
            campaign = response.content.decode("utf-8", "replace").strip()
            if not campaign.isdigit():
                return [Outcome(SubmitResult.UNCERTAIN,
                                error=short(f"{self.kind}: unreadable {code} answer: {text}"))
                        for _ in numbers]
            return [Outcome(SubmitResult.ACCEPTED,
                            provider_msg_id=provider_id(campaign, n) if n else campaign)
                    for n in numbers]
        one = self._refusal(code, text, len(numbers), response)
        return [one for _ in numbers]

    def _refusal(self, code: int, text: str, count: int, response: httpx.Response) -> Outcome:
        label = f"{self.kind} http {code}: {text}" if text else f"{self.kind} http {code}"
        if code == 401:
            if IP_NOT_ALLOWED_MARK in text:
                return blocked("address_not_allowed", label)
            return blocked("credentials", label)
        if code == 400:
            word = text.split()[0].strip(".:") if text.split() else ""
            known = SEND_ERRORS.get(word)
            if known is None:  # not in the guide: not sent, and nothing final made up
                return Outcome(SubmitResult.RETRY, error=short(f"{label} (undocumented)"))
            detail = short(f"{self.kind} {word}: {known.meaning}")
            if known.verdict is SendVerdict.NO_CREDIT:
                return blocked("no_credit", detail)
            if known.verdict is SendVerdict.SENDER_NOT_REGISTERED:
                return blocked("sender_not_registered", detail)
            if known.verdict is SendVerdict.NUMBER and count > 1:
                # One number of the batch is refused, and the answer does not say which:
                # none was sent, all may go again.
                return Outcome(SubmitResult.RETRY, error=short(f"{detail} (one number of"
                                                               f" a batch of {count})"))
            return Outcome(SubmitResult.REJECTED, error=detail,
                           error_kind=IYS_ERROR if word in IYS_SEND_ERRORS else None)
        if code == 413:  # the guide: a request over 10 MB
            return Outcome(SubmitResult.REJECTED, error=short(label))
        generic = self.http_outcome(response, text)
        if generic is not None and generic.result is not SubmitResult.REJECTED:
            return generic
        # Another 4xx is not in the guide: not sent, never a made-up refusal.
        return Outcome(SubmitResult.RETRY, error=short(f"{label} (undocumented)"))

    # -- report push -------------------------------------------------------------------

    def _verify(self, req: CallbackRequest) -> None:
        check_callback_token(req, self.option_str(CALLBACK_TOKEN))

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        data = load_json(req.body)
        if not isinstance(data, list):
            raise ReportParseError(f"{self.kind}: body is not a JSON array")
        out: list[ParsedReport] = []
        for item in data:
            if not isinstance(item, dict):
                raise ReportParseError(f"{self.kind}: an entry is not an object")
            if entry_type(item) != "outbound":
                continue  # an inbound message pushed to the same URL
            out.append(self.report_of(item))
        return out

    def report_of(self, item: Mapping[str, Any]) -> ParsedReport:
        """One entry of a push or of a status answer (the same fields) as a report;
        an unknown status is kept verbatim and never final."""
        status = _text(item, "status", self.kind)
        if not status:
            raise ReportParseError(f"{self.kind}: an entry without a status")
        ref = _text(item, "message_custom_id", self.kind)
        campaign = _text(item, "campaign_id", self.kind)
        dest = _text(item, "dest", self.kind)
        pid = provider_id(campaign, dest) if campaign and dest else None
        if ref is None and pid is None:
            raise ReportParseError(f"{self.kind}: an entry names no message")
        return report(
            ref=ref,
            provider_msg_id=pid,
            status=status,
            state=self.state_of(status),
            reported_at_ms=verimor_time_ms(item.get("done_at")) or
            verimor_time_ms(item.get("sent_at")),
            error_code=_error_of(status, gsm_error_text(item.get("gsm_error"))),
        )

    def state_of(self, status: str) -> str:
        if status == "SENT" and not self.option_bool("sent_final"):
            return UNKNOWN_WORD_STATE
        return REPORT_STATES.get(status, UNKNOWN_WORD_STATE)


def _error_of(status: str, gsm_error: str | None) -> str | None:
    """The error kept with a report: the operator's ``gsm_error``; İYS's refusal marked
    as one (:func:`~.iys.iys_report_error`), with the status when there is no code."""
    if status in IYS_STATES:
        return iys_report_error(gsm_error or status)
    return gsm_error


def entry_type(item: Mapping[str, Any]) -> str:
    """What an entry of a push is: its ``type`` (``"outbound"``, a report; ``"inbound"``,
    a message to us), or, where it has none (the status and ``/v2/inbound_messages``
    answers write none), ``"inbound"`` for an entry with a sender and no status."""
    kind = item.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return "inbound" if "source_addr" in item and "status" not in item else "outbound"


def _asked_number(response: httpx.Response) -> str | None:
    """The number a one-message request went to, read back from the request the answer
    is to (the transport keeps it with the answer); ``None`` without one."""
    try:
        sent = load_json(response.request.content)
        dest = sent["messages"][0]["dest"]
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError):
        return None
    return dest if isinstance(dest, str) and dest and "," not in dest else None


def _text(obj: Mapping[str, Any], key: str, kind: str) -> str | None:
    """A text field (Verimor writes ids as text or as numbers); absent, null or empty ->
    ``None``; anything else is not readable."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ReportParseError(f"{kind}: {key} is not text")
    return str(value).strip() or None
