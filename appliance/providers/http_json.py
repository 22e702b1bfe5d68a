"""A plain JSON-over-HTTP gateway (``kind = "http"``): our own small, documented format.

For an in-house SMS gateway or an SMPP bridge that can speak a little HTTP.

Submit: ``POST {base_url}/messages`` with ``Authorization: Bearer <api_key>`` and
``{"ref", "to", "body", "callback_url"}``. Success is a 2xx with ``{"id": "..."}``.

Reports: ``POST`` to the callback URL, a JSON object ``{"ref", "status", "reported_at",
"id"?, "error_code"?}`` or a list of them, signed with
``X-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with secret>``.
``reported_at`` is ISO 8601 (an offset or ``Z``; no offset means UTC).

Status words (case-insensitive): ``delivered``/``DELIVRD``, ``failed``/``UNDELIV``,
``expired``, ``rejected``/``REJECTD``, ``deleted`` are final; ``accepted``,
``enroute``, ``sent``, ``buffered``, ``unknown`` are intermediate. The SMPP ``ACCEPTD``
is intermediate ACCEPTED by default; SMPP 3.4 defines it as a final state (read on the
subscriber's behalf), so option ``smpp_accepted_final = true`` maps it to final
DELIVERED. Any other word is a parse error: this format is ours, so a word we did not
define is a bug at the sender, kept raw for a look.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import httpx

from appliance.config import OptionValue

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
    parse_iso_ms,
    report,
    secrets_equal,
    short,
)
from .http_kind import http_kind
from .inbound import text_field

STATUS_STATES = {
    "delivered": "DELIVERED",
    "delivrd": "DELIVERED",
    "failed": "FAILED",
    "undeliv": "FAILED",
    "undelivered": "FAILED",
    "deleted": "FAILED",
    "expired": "EXPIRED",
    "rejected": "REJECTED",
    "rejectd": "REJECTED",
    "accepted": "ACCEPTED",
    "enroute": "ENROUTE",
    "sent": "ENROUTE",
    "buffered": "ENROUTE",
    "unknown": "ENROUTE",
}


def body_signature(body: bytes, secret: str) -> str:
    """The ``X-Signature`` value for ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class HttpJsonAdapter(ProviderAdapter):
    """Generic JSON gateway (``kind = "http"``).

    The callback key is ``secret`` (``signature_secret`` when ``secret`` is empty).
    Options: ``smpp_accepted_final`` (bool, default false).
    """

    kind = "http"
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "api_key": "",
        "secret": "",
        "signature_secret": "",
        "smpp_accepted_final": False,
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"api_key", "secret", "signature_secret"})

    def _check_settings(self) -> None:
        self._require("base_url")

    @property
    def callback_secret(self) -> str:
        return self.option_str("secret") or self.option_str("signature_secret")

    # -- submission --------------------------------------------------------------------

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        headers = {"Accept": "application/json"}
        api_key = self.option_str("api_key")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return httpx.Request(
            "POST",
            self.endpoint("/messages"),
            json={
                "ref": msg.ref,
                "to": msg.msisdn,
                "body": msg.body,
                "callback_url": msg.callback_url,
            },
            headers=headers,
        )

    def interpret_response(self, response: httpx.Response) -> Outcome:
        failed = self.http_outcome(response, short(response.text, 120))
        if failed is not None:
            return replace(failed, code=_error_code(response)) \
                if failed.result is SubmitResult.REJECTED else failed
        try:
            data = load_json(response.content)
            msg_id = data["id"]
            if isinstance(msg_id, bool) or not isinstance(msg_id, str | int):
                raise TypeError("id is not text")
            if msg_id == "":
                raise ValueError("empty id")
        except (ValueError, KeyError, TypeError):
            return Outcome(
                SubmitResult.UNCERTAIN, error=f"http: unreadable {response.status_code} answer"
            )
        return Outcome(SubmitResult.ACCEPTED, provider_msg_id=str(msg_id))

    # -- callbacks ---------------------------------------------------------------------

    def _verify(self, req: CallbackRequest) -> None:
        secret = self.callback_secret
        if not secret:
            raise AuthError("http: no secret configured")
        given = req.headers.get("x-signature", "").strip()
        if not given:
            raise AuthError("http: X-Signature missing")
        scheme, _, digest = given.partition("=")
        expected = body_signature(req.body, secret)
        if scheme.strip().lower() != "sha256" or not secrets_equal(
            "sha256=" + digest.strip().lower(), expected
        ):
            raise AuthError("http: X-Signature does not match")

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        data = load_json(req.body)
        items = data if isinstance(data, list) else [data]
        return [self._one(item) for item in items]

    def _one(self, item: object) -> ParsedReport:
        if not isinstance(item, dict):
            raise ReportParseError("http: a report is not an object")
        ref = _text(item, "ref")
        msg_id = item.get("id")
        if msg_id is not None and (isinstance(msg_id, bool) or not isinstance(msg_id, str | int)):
            raise ReportParseError("http: id is not text")
        provider_id = str(msg_id) if msg_id is not None and msg_id != "" else None
        if ref is None and provider_id is None:
            raise ReportParseError("http: report with neither ref nor id")
        status = _text(item, "status")
        if status is None:
            raise ReportParseError("http: report without status")
        word = status.strip().lower()
        if word == "acceptd":
            state = "DELIVERED" if self.option_bool("smpp_accepted_final") else "ACCEPTED"
        elif word in STATUS_STATES:
            state = STATUS_STATES[word]
        else:
            raise ReportParseError(short(f"http: unknown status {status!r}"))
        stamp = _text(item, "reported_at")
        try:
            reported_at = parse_iso_ms(stamp) if stamp else 0
        except ValueError:
            raise ReportParseError(short(f"http: reported_at {stamp!r} is not ISO 8601")) from None
        return report(
            ref=ref,
            provider_msg_id=provider_id,
            status=status,
            state=state,
            reported_at_ms=reported_at,
            error_code=_text(item, "error_code"),
        )


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ReportParseError(f"http: {key} is not text")
    return value or None


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
        msg_id = text_field(item, "id", "http")
        sender = text_field(item, "from", "http")
        text = text_field(item, "text", "http")
        if not msg_id or not sender or text is None:
            raise InboundParseError("http: inbound message without id, from or text")
        stamp = text_field(item, "received_at", "http")
        try:
            sent_at = parse_iso_ms(stamp) if stamp else 0
        except ValueError:
            raise InboundParseError(f"http: received_at {stamp!r} is not ISO 8601") from None
        return InboundMessage(msisdn=sender, to=text_field(item, "to", "http") or "", text=text,
                              provider_msg_id=msg_id, sent_at_ms=sent_at)


def _error_code(response: httpx.Response) -> str | None:
    """The ``error`` of a refusal's JSON body (``{"error": "no_route"}``), if any."""
    try:
        data = load_json(response.content)
    except ValueError:
        return None
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) and code else None


# A refusal that says "this route cannot" (ROUTE-3; docs/providers.md, "http"): the
# gateway does not serve that destination, another provider may.
ROUTE_REFUSALS = frozenset({"no_route", "destination_not_served"})
KIND = http_kind(HttpJsonAdapter, HttpJsonInbound, route_refusals=ROUTE_REFUSALS)
