"""Inbound (MO) messages in each HTTP provider's own webhook format (OPS-4).

One :class:`~appliance.providers.base.InboundReader` per kind, built over that kind's
report reader: the request is proven exactly as the provider's delivery reports are
(same signature, same shared secret, same URL forms), then read here. The appliance
receives them at ``/inbound/<provider>``; what each provider sends:

* **Vonage** (and the simulator): the inbound SMS webhook, a GET query, a form POST or a
  JSON POST as the account is set, with ``msisdn`` (the sender, international digits),
  ``to``, ``messageId``, ``text``, ``type`` (``text``, ``unicode``, ``binary``),
  ``keyword``, ``message-timestamp`` and, for a message sent in parts, ``concat=true``
  with ``concat-ref``, ``concat-total`` and ``concat-part``. Signed (``sig``) like the
  delivery receipts when ``signature_secret`` is set, else proven by ``api-key``. A
  binary message is stored with empty text (its ``data`` is in the raw request).
* **Twilio**: the incoming message webhook, a form POST (or GET) with ``From``, ``To``,
  ``Body``, ``MessageSid`` (or ``SmsSid``), signed with ``X-Twilio-Signature`` over the
  inbound URL. Twilio joins a message's segments before it calls. The answer is an empty
  TwiML ``<Response></Response>`` (no reply is sent to the sender).
* **Infobip**: the forwarded inbound messages, JSON ``{"results": [{"messageId", "from",
  "to", "text", "cleanText", "keyword", "receivedAt", ...}]}``, proven with the same
  shared ``secret`` as its reports (``?secret=`` in the URL or HTTP Basic).
* **http** (our own format): ``POST`` a JSON object ``{"id", "from", "to", "text",
  "received_at"?}`` or a list of them, signed ``X-Signature: sha256=<hex HMAC-SHA256 of
  the body, keyed with secret>`` exactly like its reports. ``id`` is the gateway's id
  for the message (a retry carries the same one); ``received_at`` ISO 8601.

Anything authentic that cannot be read is an :class:`InboundParseError`: kept raw, and
still answered ``2xx`` (the provider would only send it again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import (
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    InboundReader,
    ReportReader,
    content_type,
    decode_utf8,
    load_json,
    parse_form,
    parse_iso_ms,
)
from .http_json import HttpJsonAdapter
from .infobip import InfobipAdapter
from .twilio import FormFields, TwilioAdapter
from .vonage import VonageAdapter, dlr_time_ms

TWIML_EMPTY = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
_MAX_PARTS = 255  # a concatenated SMS has at most 255 parts (one octet in the UDH)


def _part_number(value: str, what: str) -> int:
    text = value.strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= _MAX_PARTS:
        raise InboundParseError(f"vonage: {what} {value!r} is not a part number")
    return int(text)


class VonageInbound(InboundReader):
    """Vonage's inbound SMS webhook (kinds ``vonage`` and ``simulator``)."""

    reports: VonageAdapter

    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        try:
            params = self.reports.webhook_params(req)
        except ValueError as exc:
            raise InboundParseError(f"vonage: {exc}") from None
        if not params or set(params) <= {"api-key", "timestamp", "nonce", "sig"}:
            return []  # an empty ping
        if "status" in params and "text" not in params and "type" not in params:
            raise InboundParseError("vonage: a delivery receipt, not an inbound message"
                                    f" (receipts go to /callbacks/{self.name})")
        sender = params.get("msisdn", "").strip()
        msg_id = params.get("messageId", "").strip()
        if not sender:
            raise InboundParseError("vonage: inbound message without msisdn")
        if not msg_id:
            raise InboundParseError("vonage: inbound message without messageId")
        kind = params.get("type", "text").strip().lower()
        text = params.get("text", "") if kind != "binary" else ""
        concat_ref: str | None = None
        part = parts = 1
        if params.get("concat", "").strip().lower() == "true":
            concat_ref = params.get("concat-ref", "").strip()
            if not concat_ref:
                raise InboundParseError("vonage: concat=true without concat-ref")
            part = _part_number(params.get("concat-part", ""), "concat-part")
            parts = _part_number(params.get("concat-total", ""), "concat-total")
            if part > parts:
                raise InboundParseError(f"vonage: part {part} of {parts}")
        return [InboundMessage(msisdn=sender, to=params.get("to", "").strip(), text=text,
                               provider_msg_id=msg_id, sent_at_ms=dlr_time_ms(params),
                               concat_ref=concat_ref, part=part, parts=parts)]

    def inbound_response(self) -> tuple[int, bytes, str]:
        return (200, b"", "text/plain")


class TwilioInbound(InboundReader):
    """Twilio's incoming message webhook."""

    reports: TwilioAdapter

    def _fields(self, req: CallbackRequest) -> FormFields:
        if req.method.upper() == "GET":
            return FormFields(parse_form(req.query))
        if not req.body or content_type(req.headers) == "application/json":
            return FormFields([])
        return FormFields(parse_form(decode_utf8(req.body)))

    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        try:
            fields = self._fields(req)
            sender = (fields.get("From") or "").strip()
            sid = (fields.get("MessageSid") or fields.get("SmsMessageSid")
                   or fields.get("SmsSid") or "").strip()
            status = (fields.get("SmsStatus") or fields.get("MessageStatus") or "").strip()
            body = fields.get("Body")
            to = (fields.get("To") or "").strip()
        except ValueError as exc:
            raise InboundParseError(f"twilio: {exc}") from None
        if not fields:
            return []
        if body is None and status and status.lower() not in ("received", "receiving"):
            raise InboundParseError("twilio: a status callback, not an incoming message"
                                    f" (status callbacks go to /callbacks/{self.name})")
        if not sender or not sid:
            raise InboundParseError("twilio: incoming message without From or MessageSid")
        return [InboundMessage(msisdn=sender, to=to, text=body or "", provider_msg_id=sid)]

    def inbound_response(self) -> tuple[int, bytes, str]:
        return (200, TWIML_EMPTY, "text/xml")


def _text(obj: Mapping[str, Any], key: str, kind: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InboundParseError(f"{kind}: {key} is not text")
    return str(value)


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
        sender = _text(item, "from", "infobip")
        msg_id = _text(item, "messageId", "infobip")
        if not sender or not msg_id:
            raise InboundParseError("infobip: inbound message without from or messageId")
        text = _text(item, "text", "infobip")
        if text is None:
            text = _text(item, "cleanText", "infobip")
        stamp = _text(item, "receivedAt", "infobip")
        try:
            sent_at = parse_iso_ms(stamp) if stamp else 0
        except ValueError:
            sent_at = 0
        return InboundMessage(msisdn=sender, to=_text(item, "to", "infobip") or "",
                              text=text or "", provider_msg_id=msg_id, sent_at_ms=sent_at)


class HttpJsonInbound(InboundReader):
    """The ``http`` kind's inbound format: ``{"id", "from", "to", "text", "received_at"?}``."""

    reports: HttpJsonAdapter

    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        data = load_json(req.body)
        items = data if isinstance(data, list) else [data]
        return [self._one(item) for item in items]

    def _one(self, item: object) -> InboundMessage:
        if not isinstance(item, dict):
            raise InboundParseError("http: an inbound message is not an object")
        msg_id = _text(item, "id", "http")
        sender = _text(item, "from", "http")
        text = _text(item, "text", "http")
        if not msg_id or not sender or text is None:
            raise InboundParseError("http: inbound message without id, from or text")
        stamp = _text(item, "received_at", "http")
        try:
            sent_at = parse_iso_ms(stamp) if stamp else 0
        except ValueError:
            raise InboundParseError(f"http: received_at {stamp!r} is not ISO 8601") from None
        return InboundMessage(msisdn=sender, to=_text(item, "to", "http") or "", text=text,
                              provider_msg_id=msg_id, sent_at_ms=sent_at)


def inbound_reader(reports: ReportReader) -> InboundReader | None:
    """The inbound reader of an HTTP kind, over its report reader; None for a kind that
    has no inbound webhook."""
    if isinstance(reports, VonageAdapter):  # the simulator kind too
        return VonageInbound(reports)
    if isinstance(reports, TwilioAdapter):
        return TwilioInbound(reports)
    if isinstance(reports, InfobipAdapter):
        return InfobipInbound(reports)
    if isinstance(reports, HttpJsonAdapter):
        return HttpJsonInbound(reports)
    return None
