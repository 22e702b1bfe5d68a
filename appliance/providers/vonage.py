"""Vonage (formerly Nexmo) SMS API: submit, delivery receipts, signed webhooks.

Submit: ``POST {base_url}/sms/json``, form-encoded, our ref as ``client-ref`` and the
per-message ``callback``. The answer is ``200`` with ``messages[]``, one entry per SMS
part, each with a ``status`` (``"0"`` is success) and a ``message-id``.

Delivery receipts arrive as a GET query, a form POST or a JSON POST (an account
setting), with ``client-ref`` echoed back. They are authenticated by Vonage's signed
webhooks (``sig``, ``timestamp``, ``nonce``) when ``signature_secret`` is configured;
without it, only by the ``api-key`` field matching ``api_key`` (unsigned mode: weaker,
anyone who learns the key can forge a report).

The signature, as Vonage publishes it: take every parameter except ``sig``, sorted by
name; in each value replace ``&`` and ``=`` with ``_``; join as ``&name=value`` (a
leading ``&`` on each); then ``md5hash`` is the MD5 of that string followed by the
secret, and ``md5``/``sha1``/``sha256``/``sha512`` are the HMAC of that string keyed by
the secret. Hex digests are compared case-insensitively, in constant time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import ClassVar

import httpx

from appliance.config import OptionValue
from appliance.message_text.segments import is_gsm7
from appliance.states import UNKNOWN_WORD_STATE

from .base import (
    AuthError,
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    InboundReader,
    Outcome,
    OutgoingMessage,
    ParsedReport,
    PartOutcome,
    ProviderAdapter,
    ReportParseError,
    SubmitResult,
    content_type,
    decode_utf8,
    load_json,
    parse_form,
    report,
    secrets_equal,
    short,
    unique_params,
)
from .http_kind import http_kind
from .inbound import MAX_PARTS
from .validity_fields import TTL_RANGE_S, vonage_ttl
from .vonage_codes import DLR_STATES as DLR_STATES
from .vonage_codes import ROUTE_REFUSALS as ROUTE_REFUSALS
from .vonage_codes import SIGNATURE_METHODS as SIGNATURE_METHODS
from .vonage_codes import SUBMIT_STATUS_TEXT as SUBMIT_STATUS_TEXT
from .vonage_codes import TRANSIENT_SUBMIT_STATUS as TRANSIENT_SUBMIT_STATUS
from .vonage_codes import vonage_signature as vonage_signature

_SCTS = re.compile(r"[0-9]{10}(?:[0-9]{2})?")
# ``message-timestamp`` as Vonage writes it, read without ``strptime`` (which costs a
# tenth of a receipt's parsing); anything else goes to ``strptime`` as before.
_STAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})")
_PARAMS = "vonage.params"  # this adapter's entry in CallbackRequest.derived


def dlr_time_ms(params: Mapping[str, str]) -> int:
    """Report time: ``message-timestamp`` (UTC, seconds), else ``scts`` (minutes), else 0.

    ``message-timestamp`` is when Vonage started pushing this receipt, so a re-push of
    the same receipt keeps it; ``scts`` is the carrier's time, minute resolution.
    """
    stamp = params.get("message-timestamp", "").strip()
    if stamp:
        try:
            exact = _STAMP.fullmatch(stamp)
            if exact is not None:  # what strptime would read, for the usual shape
                y, mo, d, h, mi, sec = (int(g) for g in exact.groups())
                dt = datetime(y, mo, d, h, mi, sec, tzinfo=UTC)
            else:
                dt = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            return int(dt.timestamp() * 1000)
        except ValueError:
            pass
    scts = params.get("scts", "").strip()
    if _SCTS.fullmatch(scts):
        fmt = "%y%m%d%H%M%S" if len(scts) == 12 else "%y%m%d%H%M"
        try:
            dt = datetime.strptime(scts, fmt).replace(tzinfo=UTC)
            return int(dt.timestamp() * 1000)
        except ValueError:
            pass
    return 0


def dlr_error_code(params: Mapping[str, str]) -> str | None:
    """The receipt's ``err-code``, or ``None`` for ``"0"`` (Vonage's "no error")."""
    code = params.get("err-code", "").strip()
    return None if not code or code.strip("0") == "" else code


class VonageAdapter(ProviderAdapter):
    """Vonage SMS API (``kind = "vonage"``).

    Options: ``sign_requests`` (bool, default false): sign submissions with
    ``signature_secret`` instead of sending ``api_secret``; ``max_skew_s`` (float, default
    0 = off): reject a signed webhook whose ``timestamp`` is further than this from our
    clock. Off by default because Vonage retries a receipt for a day after an outage, and
    a genuine receipt refused is a receipt lost (MSG-5); newer-wins makes an old or a
    replayed receipt harmless. The age of every signed receipt is measured instead
    (:meth:`signed_age_s`).
    """

    kind = "vonage"
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {
        "api_key": "",
        "api_secret": "",
        "signature_secret": "",
        "signature_method": "sha256",
        "sign_requests": False,
        "max_skew_s": 0.0,
    }
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"api_key", "api_secret", "signature_secret"})
    OPTION_CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "signature_method": SIGNATURE_METHODS}
    # The SMS API refuses a longer ``callback`` with status 23 (Invalid Callback Url).
    CALLBACK_MAX_CHARS: ClassVar[int | None] = 100

    def _check_settings(self) -> None:
        self._require("base_url", "api_key")
        if self.option_bool("sign_requests"):
            self._require("signature_secret")
        else:
            self._require("api_secret")

    def config_problems(self, callback_url: str) -> list[str]:
        problems = super().config_problems(callback_url)
        limit = self.CALLBACK_MAX_CHARS
        if limit is not None and len(callback_url) > limit:
            problems.append(
                f"[providers.{self.name}] callback URL {callback_url} is {len(callback_url)}"
                f" characters; Vonage accepts at most {limit} in `callback` (shorten"
                " public_url or the provider name)"
            )
        return problems

    # -- submission --------------------------------------------------------------------

    def submit_params(self, msg: OutgoingMessage) -> dict[str, str]:
        """The form fields of a submission, signed or with ``api_secret``."""
        s = self.settings
        params = {
            "api_key": self.option_str("api_key"),
            "from": s.sender,
            "to": msg.msisdn.removeprefix("+"),
            "text": msg.body,
            "client-ref": msg.ref,
            "callback": msg.callback_url,
            "status-report-req": "1",
        }
        if not is_gsm7(msg.body):
            params["type"] = "unicode"
        params.update(self.encoding_params(msg))
        params.update(vonage_ttl(msg))  # ROUTE-4: the message's validity, if it has one
        if self.option_bool("sign_requests"):
            params["timestamp"] = str(self.now_ms() // 1000)
            params["sig"] = vonage_signature(params, self.option_str("signature_secret"),
                                           self.option_str("signature_method"))
        else:
            params["api_secret"] = self.option_str("api_secret")
        return params

    def encoding_params(self, msg: OutgoingMessage) -> dict[str, str]:
        """Fields that say how the text is encoded, beyond ``type`` (none for Vonage)."""
        return {}

    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        return httpx.Request("POST", self.endpoint("/sms/json"), data=self.submit_params(msg),
                             headers={"Accept": "application/json"})

    # One messages[] entry per SMS part, each with its own message-id, and a receipt per
    # part under that id: the parts are recorded (and reported on) separately.
    reports_per_part: ClassVar[bool] = True

    def interpret_response(self, response: httpx.Response) -> Outcome:
        """Every ``messages[]`` entry is one part: accepted with its own ``message-id``,
        or refused with its ``status``.

        Any part accepted: the message is taken (a resend would duplicate those parts),
        each refused part is ``REJECTED`` on its own, and a ``message-count`` above the
        entries listed leaves the unlisted parts ``UNCERTAIN``. No part accepted: the
        whole message is ``RETRY`` when every status is transient, else ``REJECTED``.
        """
        failed = self.http_outcome(response, short(response.text, 120))
        if failed is not None:
            return failed
        try:
            data = load_json(response.content)
            parts = data["messages"]
            if not isinstance(parts, list) or not parts:
                raise ValueError("no messages")
            statuses = [_status_text(part["status"]) for part in parts]
        except (ValueError, KeyError, TypeError):
            return Outcome(
                SubmitResult.UNCERTAIN,
                error=short(f"vonage: unreadable {response.status_code} answer"),
            )
        errors = [
            _describe(i, len(parts), code, parts[i].get("error-text"))
            for i, code in enumerate(statuses)
            if code != "0"
        ]
        if any(code == "0" for code in statuses):
            results: list[PartOutcome] = []
            for i, code in enumerate(statuses):
                if code == "0":
                    msg_id = parts[i].get("message-id")
                    results.append(PartOutcome(
                        i + 1, SubmitResult.ACCEPTED,
                        provider_msg_id=msg_id if isinstance(msg_id, str) and msg_id else None))
                else:
                    error = _describe(i, len(parts), code, parts[i].get("error-text"))
                    results.append(PartOutcome(i + 1, SubmitResult.REJECTED, error=short(error)))
            count = data.get("message-count") if isinstance(data, dict) else None
            listed = len(parts)
            said = str(count).strip() if isinstance(count, str | int) else ""
            if said.isascii() and said.isdigit():
                missing = f"vonage: message-count {count} but {listed} messages[] entries"
                for part in range(listed + 1, min(int(said), 255) + 1):
                    results.append(PartOutcome(part, SubmitResult.UNCERTAIN, error=missing))
                    errors.append(f"part {part}: not listed in the answer")
            return Outcome.of_parts(
                tuple(results),
                error=short("partly accepted: " + "; ".join(errors)) if errors else None,
            )
        if all(code in TRANSIENT_SUBMIT_STATUS for code in statuses):
            waits = [TRANSIENT_SUBMIT_STATUS[code] for code in statuses]
            known = [w for w in waits if w is not None]
            return Outcome(
                SubmitResult.RETRY,
                retry_after_s=max(known) if known else None,
                error=short("; ".join(errors)),
            )
        return Outcome(SubmitResult.REJECTED, error=short("; ".join(errors)),
                       code=statuses[0] if len(set(statuses)) == 1 else None)

    # -- callbacks ---------------------------------------------------------------------

    def webhook_params(self, req: CallbackRequest) -> dict[str, str]:
        """The receipt's fields from a GET query, a form POST or a JSON POST, read once
        per request (``CallbackRequest.derived``): the signature, the reports and the
        signed age all read them. The same dict each time: read it, never change it."""
        params: dict[str, str] | None = req.derived.get(_PARAMS)
        if params is None:
            params = req.derived[_PARAMS] = self._read_params(req)
        return params

    def _read_params(self, req: CallbackRequest) -> dict[str, str]:
        if req.method.upper() == "GET" or not req.body:
            return unique_params(parse_form(req.query))
        ctype = content_type(req.headers)
        is_json = ctype == "application/json" or ctype.endswith("+json")
        if not ctype and req.body.lstrip()[:1] == b"{":
            is_json = True
        if not is_json:
            return unique_params(parse_form(decode_utf8(req.body)))
        data = load_json(req.body, literal_numbers=True)
        if not isinstance(data, dict):
            raise ValueError("JSON body is not an object")
        out: dict[str, str] = {}
        for key, value in data.items():
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"field {key!r} is not a string or number")
            out[key] = value
        return out

    def _verify(self, req: CallbackRequest) -> None:
        try:
            params = self.webhook_params(req)
        except ValueError:
            raise AuthError("vonage: cannot read the parameters to verify") from None
        secret, api_key = self.option_str("signature_secret"), self.option_str("api_key")
        if not secret:
            # Unsigned mode: the api-key field is the only proof there is.
            given = params.get("api-key")
            if not api_key or given is None or not secrets_equal(given, api_key):
                raise AuthError("vonage: api-key does not match (unsigned mode)")
            return
        sig = params.get("sig", "")
        if not sig:
            raise AuthError("vonage: sig missing")
        expected = vonage_signature(params, secret, self.option_str("signature_method"))
        if not secrets_equal(sig.lower(), expected):
            raise AuthError("vonage: sig does not match")
        max_skew = self.option_float("max_skew_s")
        if max_skew > 0:
            stamp = params.get("timestamp", "")
            if not stamp.isascii() or not stamp.isdigit():
                raise AuthError("vonage: signed webhook without a timestamp")
            if abs(self.now_ms() / 1000 - int(stamp)) > max_skew:
                raise AuthError("vonage: timestamp outside the allowed skew")

    def signed_age_s(self, req: CallbackRequest) -> float | None:
        """Seconds from a signed receipt's ``timestamp`` to our clock (negative when our
        clock is behind); ``None`` for an unsigned receipt or one without a timestamp."""
        if not self.option_str("signature_secret"):
            return None
        try:
            stamp = self.webhook_params(req).get("timestamp", "")
        except ValueError:
            return None
        if not stamp.isascii() or not stamp.isdigit():
            return None
        return self.now_ms() / 1000 - int(stamp)

    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        try:
            params = self.webhook_params(req)
        except ValueError as exc:
            raise ReportParseError(short(f"vonage: {exc}")) from None
        ref = params.get("client-ref") or None
        msg_id = params.get("messageId") or None
        status = params.get("status", "").strip()
        if not status:
            if "text" in params or (ref is None and msg_id is None):
                return []  # an inbound message or an empty ping: nothing to report
            raise ReportParseError("vonage: receipt without status")
        if ref is None and msg_id is None:
            raise ReportParseError("vonage: receipt with neither client-ref nor messageId")
        return [
            report(
                ref=ref,
                provider_msg_id=msg_id,
                status=status,
                state=DLR_STATES.get(status.lower(), UNKNOWN_WORD_STATE),
                reported_at_ms=dlr_time_ms(params),
                error_code=dlr_error_code(params),
            )
        ]


def _status_text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("status is not a string or number")
    return str(value).strip()


def _describe(index: int, count: int, code: str, text: object) -> str:
    meaning = SUBMIT_STATUS_TEXT.get(code, "unknown status")
    part = f" part {index + 1}/{count}" if count > 1 else ""
    extra = f": {text}" if isinstance(text, str) and text and text != meaning else ""
    return f"vonage{part} status {code} ({meaning}){extra}"


def _part_number(value: str, what: str) -> int:
    text = value.strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_PARTS:
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


KIND = http_kind(VonageAdapter, VonageInbound, validity_range_s=TTL_RANGE_S,
                 route_refusals=ROUTE_REFUSALS)
