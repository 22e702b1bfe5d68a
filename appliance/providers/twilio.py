"""Twilio Programmable Messaging: Messages resource, status callbacks, X-Twilio-Signature.

Submit: ``POST {base_url}/2010-04-01/Accounts/{AccountSid}/Messages.json``, form-encoded
``To``, ``From`` (or ``MessagingServiceSid``), ``Body``, ``StatusCallback``; HTTP Basic
``AccountSid:AuthToken``. Success is ``201`` with the Message resource (``sid``).

Twilio has no client-reference field, so our ref rides in the ``StatusCallback`` URL as
``?ref=<ref>``. The signature covers the full URL, so the ref cannot be forged.

Status callbacks are form POSTs (``MessageSid``, ``MessageStatus``, ``ErrorCode``, ...)
signed with ``X-Twilio-Signature``: base64 of HMAC-SHA1, keyed with the Auth Token, over
the full URL Twilio called followed by every POST parameter, sorted by name, as name
then value with no separators. Every request that twilio-python's
``RequestValidator.validate()`` accepts is accepted here: the URL with or without its
port, and a repeated identical parameter counted once (or, as the scheme reads
literally, twice).

Asked (ROUTE-2): ``GET {base_url}/2010-04-01/Accounts/{AccountSid}/Messages/{Sid}.json``
(Twilio's "Fetch a Message resource"), one message a request, the same HTTP Basic. The
Message resource's ``status`` is read with the callbacks' table: a final one closes the
message through the inbox like a pushed report, any other is "still pending"; a ``404``
(Twilio error 20404, "not found") is an id Twilio does not know; a status the table does
not list is no verdict at all (DLR-8).

Twilio's callbacks carry no report time we can order by (``RawDlrDoneDate`` is the
carrier's minute-resolution time with no time zone, which Twilio documents as varying
between carriers), so ``reported_at_ms`` is always 0 and ordering falls back to
"final beats intermediate".

Validity (ROUTE-4): ``ValidityPeriod``, the seconds a message may wait in Twilio's queue
before it is not sent (error 30036, "Validity Period Expired"); whole seconds from 1 to
36,000 (Twilio error 21624, "Invalid validity period value"). Sent only when the
message has a validity of its own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator, Mapping, Sequence
from typing import ClassVar
from urllib.parse import quote, urlsplit, urlunsplit

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
    content_type,
    decode_utf8,
    load_json,
    parse_form,
    parse_retry_after,
    report,
    secrets_equal,
    short,
)
from .http_kind import http_kind
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery

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
# ROUTE-4: "Validity Period Expired": an undelivered or failed message with this code
# waited in Twilio's queue past its ValidityPeriod and was never sent.
VALIDITY_EXPIRED = "30036"


def state_of(status: str, error_code: object) -> str | None:
    """The state a Twilio status says (None: not in its list), ``EXPIRED`` for a message
    whose validity ran out in Twilio's queue (error 30036)."""
    state = STATUS_STATES.get(status.lower())
    return "EXPIRED" if state == "FAILED" and str(error_code) == VALIDITY_EXPIRED else state


# Statuses of inbound messages: not a report about anything we sent.
INBOUND_STATUSES = frozenset({"receiving", "received"})
# REST error codes that mean "too fast, try later" even when the HTTP status is 400.
RATE_LIMIT_CODES = frozenset({20429, 14107})
# ROUTE-4: ValidityPeriod, whole seconds (Twilio error 21624 names the range).
VALIDITY_PERIOD_RANGE_S = (1, 36_000)


def twilio_signature(url: str, params: list[tuple[str, str]], auth_token: str) -> str:
    """X-Twilio-Signature for ``url`` and POST ``params``, as twilio-python computes it.

    Names sorted; under each name its distinct values sorted; each appended as name then
    value. A repeated identical pair counts once (``RequestValidator.compute_signature``
    walks ``sorted(set(values))``).
    """
    return _hmac_b64(url + "".join(key + value for key, value in sorted(set(params))), auth_token)


def twilio_signature_every_pair(
    url: str, params: list[tuple[str, str]], auth_token: str
) -> str:
    """The published scheme taken literally: every pair, repeats included, sorted."""
    return _hmac_b64(url + "".join(key + value for key, value in sorted(params)), auth_token)


def _hmac_b64(signed: str, auth_token: str) -> str:
    mac = hmac.new(auth_token.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def url_variants(url: str) -> list[str]:
    """The URL as given, without its port, and with the scheme's default port.

    Twilio signs some callbacks over the URL with the port and some without, and
    twilio-python's ``RequestValidator.validate()`` accepts both: the URL with any port
    removed (``:8443`` as well as ``:443``) and, when it has none, with ``:443`` (``:80``
    for http) added. These are the same forms.
    """
    parts = urlsplit(url)
    if parts.hostname is None:
        return [url]
    auth, _, hostport = parts.netloc.rpartition("@")
    prefix = auth + "@" if auth else ""
    if hostport.startswith("["):
        host = hostport[: hostport.index("]") + 1] if "]" in hostport else hostport
    else:
        host = hostport.split(":", 1)[0]
    try:
        port = parts.port
    except ValueError:
        return [url]
    out = [url]
    if port is None:
        default = 443 if parts.scheme == "https" else 80
        out.append(urlunsplit(parts._replace(netloc=f"{prefix}{host}:{default}")))
    else:
        out.append(urlunsplit(parts._replace(netloc=f"{prefix}{host}")))
    return list(dict.fromkeys(out))


class FormFields(Mapping[str, str]):
    """Form or query fields, one value per name.

    A name repeated with the same value is one field. A name repeated with different
    values is ambiguous: reading it is a ``ValueError``, while the other fields still
    read, so an odd extra field does not make a genuine report unreadable.
    """

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._values: dict[str, str] = {}
        self._ambiguous: set[str] = set()
        for key, value in pairs:
            if self._values.setdefault(key, value) != value:
                self._ambiguous.add(key)

    def __getitem__(self, key: str) -> str:
        if key in self._ambiguous:
            raise ValueError(f"parameter {key!r} appears more than once with different values")
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class TwilioAdapter(ProviderAdapter, StatusQuery):
    """Twilio Messages API (``kind = "twilio"``).

    Options: ``messaging_service_sid`` (str, default ""): send ``MessagingServiceSid``
    instead of ``From``.
    """

    kind = "twilio"
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "account_sid": "",
        "auth_token": "",
        "messaging_service_sid": "",
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"auth_token"})

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
        if msg.validity_s is not None:  # ROUTE-4: seconds in Twilio's queue
            data["ValidityPeriod"] = str(msg.validity_s)
        sid = self.option_str("account_sid")
        return httpx.Request(
            "POST",
            self.endpoint(f"/2010-04-01/Accounts/{quote(sid, safe='')}/Messages.json"),
            data=data,
            headers={"Authorization": self._authorization(), "Accept": "application/json"},
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

    def _authorization(self) -> str:
        sid, auth = self.option_str("account_sid"), self.option_str("auth_token")
        return "Basic " + base64.b64encode(f"{sid}:{auth}".encode()).decode("ascii")

    # -- status query ------------------------------------------------------------------

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        sid = targets[0].provider_msg_id
        if not sid:
            raise ValueError("twilio: a message without its sid cannot be asked about")
        account = quote(self.option_str("account_sid"), safe="")
        path = f"/2010-04-01/Accounts/{account}/Messages/{quote(sid, safe='')}.json"
        return httpx.Request("GET", self.endpoint(path),
                             headers={"Authorization": self._authorization(),
                                      "Accept": "application/json"})

    def read_status_answer(self, targets: Sequence[PullTarget], status_code: int,
                           answer: CallbackRequest) -> PullAnswer:
        if status_code == 404 and targets:  # "The requested resource ... was not found"
            return PullAnswer(verdicts={targets[0].ref: PullVerdict.UNKNOWN_ID})
        return super().read_status_answer(targets, status_code, answer)

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        target = targets[0]
        body = load_json(answer.body)
        if not isinstance(body, dict):
            return PullAnswer.failed("twilio status: the answer is not a Message resource")
        sid, status = body.get("sid"), body.get("status")
        if not isinstance(sid, str) or not isinstance(status, str):
            return PullAnswer.failed("twilio status: no sid or status in the answer")
        if sid != target.provider_msg_id:
            return PullAnswer.failed("twilio status: the answer is about another message")
        state = state_of(status, body.get("error_code"))
        if state is None:  # not in Twilio's list: nothing is made of it
            return PullAnswer(verdicts={target.ref: PullVerdict.ERROR},
                              error=short(f"twilio status: unknown status {status!r}"))
        if state not in REPORTED_FINAL_STATES:
            return PullAnswer(verdicts={target.ref: PullVerdict.PENDING})
        code = body.get("error_code")
        found = report(ref=target.ref, provider_msg_id=sid, status=status, state=state,
                       reported_at_ms=0,
                       error_code=None if code is None else short(str(code), 40))
        return PullAnswer(reports=(found,), verdicts={target.ref: PullVerdict.FINAL})

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
        query = FormFields(parse_form(req.query))
        if "bodySHA256" in query:
            digest = hashlib.sha256(req.body).hexdigest()
            if not secrets_equal(query["bodySHA256"].lower(), digest):
                raise AuthError("twilio: bodySHA256 does not match the body")
        token = self.option_str("auth_token")
        repeats = len(set(params)) != len(params)
        for url in url_variants(req.url):
            if secrets_equal(given, twilio_signature(url, params, token)):
                return
            if repeats and secrets_equal(given, twilio_signature_every_pair(url, params, token)):
                return
        raise AuthError("twilio: X-Twilio-Signature does not match")

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        try:
            query = FormFields(parse_form(req.query))
            # A GET callback carries its fields in the query (it has no body).
            fields = query if req.method.upper() == "GET" else FormFields(self._post_params(req))
        except ValueError as exc:
            raise ReportParseError(short(f"twilio: {exc}")) from None
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
                state=state_of(status, fields.get("ErrorCode")) or UNKNOWN_WORD_STATE,
                reported_at_ms=0,
                error_code=fields.get("ErrorCode"),
            )
        ]

    def callback_response(self) -> tuple[int, bytes, str]:
        return (204, b"", "text/plain")


TWIML_EMPTY = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


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


KIND = http_kind(TwilioAdapter, TwilioInbound, status_query=True,
                 validity_range_s=VALIDITY_PERIOD_RANGE_S)
