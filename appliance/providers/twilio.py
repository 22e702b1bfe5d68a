"""Twilio Programmable Messaging: Messages resource, status callbacks, X-Twilio-Signature.

Submit: ``POST {base_url}/2010-04-01/Accounts/{AccountSid}/Messages.json``, form-encoded
``To``, ``From`` (or ``MessagingServiceSid``), ``Body``, ``StatusCallback``; HTTP Basic
``AccountSid:AuthToken``. Success is ``201`` with the Message resource (``sid``).

Twilio has no client-reference field, so our ref rides in the ``StatusCallback`` URL as
``?ref=<ref>``. The signature covers the full URL, so the ref cannot be forged.

Status callbacks are form POSTs (``MessageSid``, ``MessageStatus``, ``ErrorCode``, ...)
signed with ``X-Twilio-Signature``: base64 of HMAC-SHA1, keyed with the Auth Token, over
the full URL Twilio called followed by every POST parameter, sorted by name, as name
then value with no separators.

Twilio's callbacks carry no report time we can order by (``RawDlrDoneDate`` is the
carrier's minute-resolution time with no time zone, which Twilio documents as varying
between carriers), so ``reported_at_ms`` is always 0 and ordering falls back to
"final beats intermediate".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import ClassVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from .base import (
    UNKNOWN_WORD_STATE,
    AuthError,
    CallbackRequest,
    OptionDefaults,
    Outcome,
    OutgoingMessage,
    ParsedReport,
    ProviderAdapter,
    ReportParseError,
    SubmitResult,
    content_type,
    decode_utf8,
    load_json,
    parse_form,
    parse_retry_after,
    report,
    secrets_equal,
    short,
    unique_params,
)

# Message status values -> our state.
STATUS_STATES = {
    "accepted": "ACCEPTED",
    "scheduled": "ACCEPTED",
    "queued": "ACCEPTED",
    "sending": "ENROUTE",
    "sent": "ENROUTE",
    "delivered": "DELIVERED",
    "read": "DELIVERED",
    "undelivered": "FAILED",
    "failed": "FAILED",
    "canceled": "FAILED",
}
# Statuses of inbound messages: not a report about anything we sent.
INBOUND_STATUSES = frozenset({"receiving", "received"})
# REST error codes that mean "too fast, try later" even when the HTTP status is 400.
RATE_LIMIT_CODES = frozenset({20429, 14107})


def twilio_signature(url: str, params: list[tuple[str, str]], auth_token: str) -> str:
    """X-Twilio-Signature for ``url`` and POST ``params`` (sorted here by name, value)."""
    signed = url + "".join(key + value for key, value in sorted(params))
    mac = hmac.new(auth_token.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def url_variants(url: str) -> list[str]:
    """The URL as given, and with the default port added or removed.

    Proxies and load balancers disagree on whether ``:443`` is part of the URL; Twilio's
    own validators try both forms, and so do we.
    """
    parts = urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    if default is None or parts.hostname is None:
        return [url]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    auth = parts.netloc.rpartition("@")[0]
    prefix = auth + "@" if auth else ""
    if parts.port is None:
        other = urlunsplit(parts._replace(netloc=f"{prefix}{host}:{default}"))
    elif parts.port == default:
        other = urlunsplit(parts._replace(netloc=f"{prefix}{host}"))
    else:
        return [url]
    return [url, other]


class TwilioAdapter(ProviderAdapter):
    """Twilio Messages API (``kind = "twilio"``).

    Options: ``messaging_service_sid`` (str, default ""): send ``MessagingServiceSid``
    instead of ``From``.
    """

    kind = "twilio"
    OPTIONS: ClassVar[OptionDefaults] = {"messaging_service_sid": ""}

    def _check_settings(self) -> None:
        self._require("base_url", "account_sid", "auth_token")
        if not self.option_str("messaging_service_sid"):
            self._require("sender")

    # -- submission --------------------------------------------------------------------

    @staticmethod
    def status_callback(msg: OutgoingMessage) -> str:
        """The per-message StatusCallback: the callback URL with ``ref`` in its query."""
        sep = "&" if "?" in msg.callback_url else "?"
        return f"{msg.callback_url}{sep}ref={quote(msg.ref, safe='')}"

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        s = self.settings
        data = {"To": msg.msisdn}
        service = self.option_str("messaging_service_sid")
        if service:
            data["MessagingServiceSid"] = service
        else:
            data["From"] = s.sender
        data["Body"] = msg.body
        data["StatusCallback"] = self.status_callback(msg)
        token = base64.b64encode(f"{s.account_sid}:{s.auth_token}".encode()).decode("ascii")
        return httpx.Request(
            "POST",
            self.endpoint(f"/2010-04-01/Accounts/{quote(s.account_sid, safe='')}/Messages.json"),
            data=data,
            headers={"Authorization": f"Basic {token}", "Accept": "application/json"},
        )

    def interpret_response(self, response: httpx.Response) -> Outcome:
        code: int | None = None
        text = ""
        if not 200 <= response.status_code < 300:
            try:
                body = load_json(response.content)
                if isinstance(body, dict):
                    raw_code = body.get("code")
                    if isinstance(raw_code, int) and not isinstance(raw_code, bool):
                        code = raw_code
                    message = body.get("message")
                    text = message if isinstance(message, str) else ""
            except ValueError:
                text = short(response.text, 120)
            if code is not None:
                text = f"code {code}: {text}" if text else f"code {code}"
            if code in RATE_LIMIT_CODES:
                wait = parse_retry_after(response.headers.get("retry-after"), self.now_ms())
                error = short(f"twilio http {response.status_code}: {text}")
                return Outcome(SubmitResult.RETRY, retry_after_s=wait, error=error)
        failed = self.http_outcome(response, text)
        if failed is not None:
            return failed
        try:
            body = load_json(response.content)
            sid = body["sid"]
            if not isinstance(sid, str) or not sid:
                raise ValueError("no sid")
        except (ValueError, KeyError, TypeError):
            return Outcome(
                SubmitResult.UNCERTAIN,
                error=f"twilio: unreadable {response.status_code} answer",
            )
        return Outcome(SubmitResult.ACCEPTED, provider_msg_id=sid)

    # -- callbacks ---------------------------------------------------------------------

    def _post_params(self, req: CallbackRequest) -> list[tuple[str, str]]:
        if req.method.upper() != "POST" or not req.body:
            return []
        if content_type(req.headers) == "application/json":
            return []  # JSON bodies are covered by bodySHA256 in the URL instead
        return parse_form(decode_utf8(req.body))

    def _verify(self, req: CallbackRequest) -> None:
        given = req.headers.get("x-twilio-signature", "")
        if not given:
            raise AuthError("twilio: X-Twilio-Signature missing")
        try:
            params = self._post_params(req)
        except ValueError:
            raise AuthError("twilio: cannot read the parameters to verify") from None
        query = unique_params(parse_form(req.query)) if req.query else {}
        if "bodySHA256" in query:
            digest = hashlib.sha256(req.body).hexdigest()
            if not secrets_equal(query["bodySHA256"].lower(), digest):
                raise AuthError("twilio: bodySHA256 does not match the body")
        token = self.settings.auth_token
        for url in url_variants(req.url):
            if secrets_equal(given, twilio_signature(url, params, token)):
                return
        raise AuthError("twilio: X-Twilio-Signature does not match")

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        try:
            fields = unique_params(self._post_params(req))
            query = unique_params(parse_form(req.query))
        except ValueError as exc:
            raise ReportParseError(short(f"twilio: {exc}")) from None
        if req.method.upper() == "GET":
            fields = {**query, **fields}
        status = (fields.get("MessageStatus") or fields.get("SmsStatus") or "").strip()
        if not status or status.lower() in INBOUND_STATUSES:
            if status or "Body" in fields or not fields:
                return []  # inbound message, or a callback with nothing in it
            raise ReportParseError("twilio: callback without MessageStatus")
        ref = query.get("ref") or None
        sid = fields.get("MessageSid") or fields.get("SmsSid") or None
        if ref is None and sid is None:
            raise ReportParseError("twilio: callback with neither ref nor MessageSid")
        return [
            report(
                ref=ref,
                provider_msg_id=sid,
                status=status,
                state=STATUS_STATES.get(status.lower(), UNKNOWN_WORD_STATE),
                reported_at_ms=0,
                error_code=fields.get("ErrorCode"),
            )
        ]

    def callback_response(self) -> tuple[int, bytes, str]:
        return (204, b"", "text/plain")
