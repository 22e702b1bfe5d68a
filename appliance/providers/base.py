"""What a provider is: a transport, a wire format and a report reader.

A configured provider (:class:`Provider`) is three parts:

* a :class:`Transport` carries submissions to the provider and says what came of each
  (:class:`Outcome`): for the HTTP kinds an ``HttpTransport`` (a pool of keep-alive
  connections and the token bucket), for SMPP a bound session;
* a :class:`WireFormat` (HTTP kinds) turns an :class:`OutgoingMessage` into an
  ``httpx.Request`` and reads the answer into an :class:`Outcome`. It never touches the
  database and never sends anything itself: the transport owns the connection, so the
  transport decides what a failure to send means (for HTTP,
  :func:`~appliance.providers.http_transport.classify_transport_error`);
* a :class:`ReportReader` checks that a callback really comes from the provider
  (:meth:`ReportReader.verify`) and reads the callback into :class:`ParsedReport` values.
  A provider that reports over its own session (SMPP receipts) has none.

Beside them, an :class:`InboundReader` (OPS-4) reads the provider's inbound-message
webhook into :class:`InboundMessage` values, proving it with the report reader's own
check (:mod:`appliance.providers.inbound` has one per HTTP kind).

The HTTP kinds (:class:`ProviderAdapter` subclasses) are one class each that is both the
wire format and the report reader, since both speak the same provider's dialect and
share its settings and signatures.

Outcomes, from the money point of view: a request that never left the process is
``RETRY``; one that may have reached the provider (timeout after writing, a dropped
connection, an unreadable answer) is ``UNCERTAIN``: not resent automatically unless the
provider dedupes on our ref (``dedupes_on_ref``); a delivery report resolves it.

Mapped report states: final ``DELIVERED``, ``FAILED``, ``EXPIRED``, ``REJECTED``;
intermediate ``ACCEPTED``, ``ENROUTE``. A provider status word an adapter does not know
is kept verbatim and mapped to the intermediate ``ENROUTE``: it is recorded in the
message history but can never close a message or move it backwards.

Errors from a callback are two kinds and only two: :class:`AuthError` (the caller answers
``401`` and applies nothing) and :class:`ReportParseError` (authenticated but not
understood: the caller keeps the raw request and still answers ``2xx``).
:meth:`ReportReader.parse_reports` guarantees that nothing else escapes it.
"""

from __future__ import annotations

import hmac
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any, ClassVar
from urllib.parse import parse_qsl

import httpx

from appliance.clock import Clock
from appliance.config import ConfigError, ProviderSettings
from appliance.states import (
    REPORTED_FINAL_STATES,
    REPORTED_INTERMEDIATE_STATES,
)

# Upper bound on what we keep of a provider's error text in an Outcome.
_ERROR_MAX = 200
# Upper bound on parameters in one form or query string: reports are small.
_MAX_FIELDS = 1000


class SubmitResult(StrEnum):
    """What a submission attempt came to, from the money point of view."""

    ACCEPTED = "ACCEPTED"  # the provider took it (and normally gave an id)
    RETRY = "RETRY"  # the provider did not take it; safe to send again later
    REJECTED = "REJECTED"  # permanent refusal: final, never resent
    UNCERTAIN = "UNCERTAIN"  # may or may not have been taken: not resent blindly


@dataclass(frozen=True)
class PartOutcome:
    """What came of one part of a message, for a provider that answers per part.

    ``part`` counts from 1 in the provider's order (Vonage's ``messages[]``, SMPP's
    segments). ``ACCEPTED`` carries the part's own id; ``REJECTED`` is final for that
    part; ``RETRY`` (a session transport only: that segment was not taken) means the
    part is sent again by a later attempt; ``UNCERTAIN`` means it may have been taken
    and is never sent again blindly.
    """

    part: int
    result: SubmitResult
    provider_msg_id: str | None = None
    error: str | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Outcome:
    """The verdict on one submission.

    ``parts`` is empty when the provider answered for the message as a whole: then an
    ``ACCEPTED`` outcome is one part carrying ``provider_msg_id`` (Twilio and Infobip
    bill the parts behind one id). When the provider answered per part, ``parts`` lists
    every part this submission tried (every part not in the message's
    ``skip_parts``), and ``result``, ``provider_msg_id`` and ``error`` summarise them
    (:meth:`of_parts`); the sender records the parts.
    """

    result: SubmitResult
    provider_msg_id: str | None = None
    retry_after_s: float | None = None
    error: str | None = None
    parts: tuple[PartOutcome, ...] = ()
    # RETRY because the provider could not be reached at all (connection refused, a
    # connect timeout, an SMPP session not bound): nothing left this process. Such an
    # attempt does not count against ``max_attempts`` and holds the provider's lane, so
    # an outage delays messages rather than rejecting them.
    unreached: bool = False

    @classmethod
    def of_parts(cls, parts: tuple[PartOutcome, ...], error: str | None = None) -> Outcome:
        """An outcome from per-part results; the summary says what the money did.

        ``ACCEPTED`` when any part was taken (a resend would duplicate it), else
        ``UNCERTAIN`` when any part may have been, else ``RETRY`` when any part may be
        sent again, else ``REJECTED``. The id is the first accepted part's; the wait is
        the longest a retried part asked for.
        """
        if not parts:
            raise ValueError("an outcome of parts needs at least one part")
        results = {p.result for p in parts}
        for result in (SubmitResult.ACCEPTED, SubmitResult.UNCERTAIN, SubmitResult.RETRY,
                       SubmitResult.REJECTED):
            if result in results:
                break
        first_id = next((p.provider_msg_id for p in parts
                         if p.result is SubmitResult.ACCEPTED and p.provider_msg_id), None)
        waits = [p.retry_after_s for p in parts
                 if p.result is SubmitResult.RETRY and p.retry_after_s is not None]
        if error is None:
            errors = [f"part {p.part}: {p.error}" for p in parts if p.error]
            error = short("; ".join(errors)) if errors else None
        return cls(result, provider_msg_id=first_id, retry_after_s=max(waits, default=None),
                   error=error, parts=tuple(sorted(parts, key=lambda p: p.part)))


@dataclass(frozen=True)
class OutgoingMessage:
    """One message as the sender hands it to a transport.

    ``skip_parts`` are parts an earlier attempt already got to the provider (or may
    have): a transport that submits part by part (SMPP) sends only the others and
    reports :class:`PartOutcome` values for those. Empty on a first attempt, and always
    for the HTTP kinds, which submit a message in one request. ``encoding`` is the one
    decided at acceptance (``"GSM-7"``, ``"GSM-7 Turkish"``, ``"UCS-2"``): a transport
    sends the parts the user was shown
    (:func:`appliance.message_text.segments.segment_as`).
    """

    ref: str
    msisdn: str
    body: str
    callback_url: str
    skip_parts: frozenset[int] = frozenset()
    encoding: str = "GSM-7"


@dataclass(frozen=True)
class CallbackRequest:
    """A callback exactly as it reached the HTTP layer."""

    method: str
    url: str
    query: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class ParsedReport:
    """One delivery report, in the provider's words and in ours."""

    ref: str | None
    provider_msg_id: str | None
    status: str
    state: str
    final: bool
    reported_at_ms: int
    error_code: str | None = None


class AuthError(Exception):
    """The callback is not proven to come from the provider: answer 401, apply nothing."""


class ReportParseError(Exception):
    """The callback is authentic but cannot be read: keep it raw, still answer 2xx."""


def report(
    *,
    ref: str | None,
    provider_msg_id: str | None,
    status: str,
    state: str,
    reported_at_ms: int,
    error_code: str | None = None,
) -> ParsedReport:
    """Build a :class:`ParsedReport`, deriving ``final`` from the mapped state."""
    if state not in REPORTED_FINAL_STATES and state not in REPORTED_INTERMEDIATE_STATES:
        raise ValueError(f"not a report state: {state!r}")
    return ParsedReport(
        ref=ref or None,
        provider_msg_id=provider_msg_id or None,
        status=status,
        state=state,
        final=state in REPORTED_FINAL_STATES,
        reported_at_ms=reported_at_ms,
        error_code=error_code or None,
    )


def parse_retry_after(value: str | None, now_ms: int) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now_ms / 1000)


def short(text: str, limit: int = _ERROR_MAX) -> str:
    """One line, at most ``limit`` characters: what goes into a message row."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def secrets_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets or signatures."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def decode_utf8(body: bytes) -> str:
    """The body as text; ``ValueError`` when it is not UTF-8."""
    return body.decode("utf-8")


def load_json(body: bytes, *, literal_numbers: bool = False) -> Any:
    """Strict JSON from UTF-8 bytes: no NaN/Infinity, ``ValueError`` on anything odd.

    With ``literal_numbers`` numbers stay the exact text the sender wrote (``"0.0333"``
    stays ``"0.0333"``), which is what a signature over the values was computed on.
    """

    def reject_constant(name: str) -> Any:
        raise ValueError(f"JSON constant {name} is not allowed")

    if literal_numbers:
        return json.loads(
            decode_utf8(body), parse_constant=reject_constant, parse_float=str, parse_int=str
        )
    return json.loads(decode_utf8(body), parse_constant=reject_constant)


def parse_form(text: str) -> list[tuple[str, str]]:
    """``application/x-www-form-urlencoded`` (or a query string) as ordered pairs.

    Percent-escapes must decode to UTF-8; ``ValueError`` otherwise.
    """
    if not text:
        return []
    return parse_qsl(
        text,
        keep_blank_values=True,
        encoding="utf-8",
        errors="strict",
        max_num_fields=_MAX_FIELDS,
    )


def unique_params(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Pairs as a dict; a repeated name is ambiguous, so it is a ``ValueError``."""
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"parameter {key!r} appears more than once")
        out[key] = value
    return out


def epoch_ms(dt: datetime) -> int:
    """A datetime as UTC epoch milliseconds (naive means UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_iso_ms(text: str) -> int:
    """ISO 8601 (``Z``, ``+00:00`` or ``+0000`` offsets; naive is UTC) as epoch ms.

    ``ValueError`` when it cannot be read or lies outside years 2000-2999.
    """
    dt = datetime.fromisoformat(text.strip())
    if not 2000 <= dt.year <= 2999:
        raise ValueError(f"implausible year in {text!r}")
    return epoch_ms(dt)


def content_type(headers: Mapping[str, str]) -> str:
    """The media type of a request, lower-cased, without parameters."""
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


OptionDefaults = Mapping[str, bool | float | str]
"""Per-kind option names and their defaults (the type of a default is the type)."""


class ProviderPart:
    """What each part of a provider knows: its kind, name, settings and clock."""

    kind: ClassVar[str] = ""
    settings: ProviderSettings
    name: str

    def now_ms(self) -> int:
        raise NotImplementedError


class WireFormat(ProviderPart, ABC):
    """An HTTP provider's submission format: the request for a message, and what its
    answer means. Pure: no connection, no database."""

    @abstractmethod
    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        """The provider's submit request for one message, against ``settings.base_url``."""

    @abstractmethod
    def interpret_response(self, response: httpx.Response) -> Outcome:
        """Read the provider's answer to a submission."""

    def http_outcome(self, response: httpx.Response, error_text: str) -> Outcome | None:
        """The verdict for a non-2xx answer, or ``None`` for a 2xx the adapter must read.

        429 (and 408, 425) -> RETRY honouring ``Retry-After``; 5xx -> RETRY except 504,
        where a gateway gave up waiting for a provider that may have taken the message
        (UNCERTAIN); other 4xx -> REJECTED; 301/307/308 (the API moved, typically an
        ``http://`` base URL: the request was not processed) -> RETRY; any other answer
        (302/303 may follow a processed POST) -> UNCERTAIN.
        """
        code = response.status_code
        if 200 <= code < 300:
            return None
        label = f"{self.kind} http {code}"
        detail = f"{label}: {error_text}" if error_text else label
        if code in (408, 425, 429):
            wait = parse_retry_after(response.headers.get("retry-after"), self.now_ms())
            return Outcome(SubmitResult.RETRY, retry_after_s=wait, error=short(detail))
        if code == 504:
            return Outcome(SubmitResult.UNCERTAIN, error=short(detail))
        if code >= 500:
            wait = parse_retry_after(response.headers.get("retry-after"), self.now_ms())
            return Outcome(SubmitResult.RETRY, retry_after_s=wait, error=short(detail))
        if 400 <= code < 500:
            return Outcome(SubmitResult.REJECTED, error=short(detail))
        if code in (301, 307, 308):
            where = response.headers.get("location", "")
            moved = f"{label}: moved to {where}" if where else label
            return Outcome(SubmitResult.RETRY, error=short(moved))
        return Outcome(SubmitResult.UNCERTAIN, error=short(detail))


class ReportReader(ProviderPart, ABC):
    """Proves that a callback is the provider's and reads the reports it carries."""

    def verify(self, req: CallbackRequest) -> None:
        """Raise :class:`AuthError`, and nothing else, unless the callback is proven
        to be the provider's."""
        try:
            self._verify(req)
        except AuthError:
            raise
        except Exception as exc:
            raise AuthError(short(f"cannot verify: {type(exc).__name__}")) from None

    @abstractmethod
    def _verify(self, req: CallbackRequest) -> None:
        """Adapter-specific check; raises :class:`AuthError` (anything else becomes one)."""

    def signed_age_s(self, req: CallbackRequest) -> float | None:
        """Seconds from the time signed into a verified callback to now, for the report
        age metric; ``None`` when the kind signs no time (the default)."""
        return None

    def parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        """The reports a verified callback carries (``[]`` for one that carries none).

        Raises :class:`ReportParseError`, and nothing else, when it cannot be read.
        """
        try:
            return self._parse_reports(req)
        except (ReportParseError, AuthError):
            raise
        except RecursionError:
            raise ReportParseError("nested too deeply") from None
        except Exception as exc:
            raise ReportParseError(short(f"{type(exc).__name__}: {exc}")) from None

    @abstractmethod
    def _parse_reports(self, req: CallbackRequest) -> list[ParsedReport]:
        """Adapter-specific reading; may raise anything, the caller wraps it."""

    def callback_response(self) -> tuple[int, bytes, str]:
        """What to answer once the callback is stored: ``(status, body, content type)``."""
        return (200, b"", "text/plain")


@dataclass(frozen=True)
class InboundMessage:
    """One inbound (MO) message, or one part of it, as the provider sent it."""

    msisdn: str  # the sender, as the provider wrote it (normalised when stored)
    to: str  # our number or sender id it was sent to
    text: str
    provider_msg_id: str | None  # the provider's id for it; None when it gave none
    sent_at_ms: int = 0  # the provider's time for it, 0 when none
    # A message in parts (Vonage ``concat-*``): the sender's reference for the whole
    # message, this part's number (1-based) and how many parts there are.
    concat_ref: str | None = None
    part: int = 1
    parts: int = 1


class InboundParseError(Exception):
    """An authentic inbound request that cannot be read: keep it raw, still answer 2xx."""


class InboundReader(ProviderPart, ABC):
    """Proves that an inbound request is the provider's (with the same check as its
    reports) and reads the messages it carries."""

    def __init__(self, reports: ReportReader) -> None:
        self.reports = reports
        self.settings = reports.settings
        self.name = reports.name

    def now_ms(self) -> int:
        return self.reports.now_ms()

    def verify(self, req: CallbackRequest) -> None:
        """Raise :class:`AuthError`, and nothing else, unless the request is the
        provider's: the provider signs its inbound webhooks as it signs its reports."""
        self.reports.verify(req)

    def parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        """The messages a verified request carries (``[]`` for one that carries none).

        Raises :class:`InboundParseError`, and nothing else, when it cannot be read.
        """
        try:
            return self._parse_inbound(req)
        except (InboundParseError, AuthError):
            raise
        except RecursionError:
            raise InboundParseError("nested too deeply") from None
        except Exception as exc:
            raise InboundParseError(short(f"{type(exc).__name__}: {exc}")) from None

    @abstractmethod
    def _parse_inbound(self, req: CallbackRequest) -> list[InboundMessage]:
        """Kind-specific reading; may raise anything, the caller wraps it."""

    def inbound_response(self) -> tuple[int, bytes, str]:
        """What to answer once the request is stored: ``(status, body, content type)``."""
        return (200, b"", "text/plain")


class Transport(ABC):
    """How submissions reach a provider, and what came of each.

    ``concurrency`` is how many submissions it can have in flight at once (the sender
    sizes its batches by it). :meth:`submit` never raises: every failure is an
    :class:`Outcome` (``RETRY`` when nothing left the process, ``UNCERTAIN`` when the
    provider may have the message).
    """

    concurrency: int = 1

    async def reserve(self) -> None:
        """Wait until one more submission may go out at the provider's rate.

        The sender calls it before it marks a message ``SENDING`` and then calls
        :meth:`submit` at once, so no message waits for the rate once it is ``SENDING``
        (OPS-6: what a crash leaves ``SENDING`` is what was really on its way). A
        transport that paces inside :meth:`submit` (per segment) leaves it as is.
        """
        return None  # a hook with a default, not an abstract method

    @abstractmethod
    async def submit(self, msg: OutgoingMessage) -> Outcome:
        """Submit one message; pace it by the provider's rate (using a token taken by
        :meth:`reserve` if there is one)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections or end the session (after the last submission)."""

    def status(self) -> Mapping[str, float | str | bool]:
        """What the transport's state is now, for ``/metrics`` and ``/readyz``."""
        return {}


@dataclass(frozen=True)
class Provider:
    """A configured provider: how it is reached, and how its reports are read."""

    name: str
    kind: str
    settings: ProviderSettings
    transport: Transport
    # None for a provider that reports over its own session rather than by callback.
    reports: ReportReader | None
    # The provider itself drops a second submission of our ref: an uncertain send may
    # be resent.
    dedupes_on_ref: bool
    # Its reports carry only its own id: the sender records the id -> ref mapping.
    reports_by_provider_id_only: bool
    # It reports on every SMS part separately (Vonage, SMPP), rather than once for a
    # message whose parts it bills behind one id (Twilio, Infobip).
    reports_per_part: bool = False
    # How its inbound webhook is read; None for a provider whose inbound messages come
    # over its own session (SMPP ``deliver_sm``), or that has none.
    inbound: InboundReader | None = None


class ProviderAdapter(WireFormat, ReportReader):
    """One HTTP provider kind: its wire format and its report reader, from its settings.

    Subclasses set ``kind`` and implement the verbs. ``OPTIONS`` lists the extra
    per-provider settings a kind understands (read from the provider's TOML table) with
    their defaults; any other key, or a value of the wrong type, is a
    :class:`ConfigError` when the adapter is built.
    """

    OPTIONS: ClassVar[OptionDefaults] = {}
    reports_by_provider_id_only: ClassVar[bool] = False
    reports_per_part: ClassVar[bool] = False

    def __init__(
        self, settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._now_ms = now_ms or Clock.from_env().now_ms
        self._options = self._read_options(settings)
        self._check_settings()

    # -- configuration -----------------------------------------------------------------

    def _where(self, key: str) -> str:
        return f"[providers.{self.name}] {key}"

    def _read_options(self, settings: ProviderSettings) -> dict[str, bool | float | str]:
        values: dict[str, bool | float | str] = dict(self.OPTIONS)
        for key, raw in settings.options.items():
            if key not in self.OPTIONS:
                known = ", ".join(sorted(self.OPTIONS)) or "none"
                raise ConfigError(
                    f"{self._where(key)}: unknown setting for kind {self.kind!r} (options: {known})"
                )
            want = self.OPTIONS[key]
            if isinstance(want, bool):
                ok = isinstance(raw, bool)
                value: bool | float | str = raw
            elif isinstance(want, float):
                ok = isinstance(raw, int | float) and not isinstance(raw, bool) and raw >= 0
                value = float(raw) if ok else raw
            else:
                ok = isinstance(raw, str)
                value = raw
            if not ok:
                raise ConfigError(
                    f"{self._where(key)}: expected {type(want).__name__}, got {raw!r}"
                )
            values[key] = value
        return values

    def _check_settings(self) -> None:
        """Raise :class:`ConfigError` for a missing required setting. Extended per kind."""
        self._require("base_url")

    def config_problems(self, callback_url: str) -> list[str]:
        """What the provider would refuse in this configuration, found before anything is
        sent (MSG-7): one line each, naming the limit. ``callback_url`` is the URL the
        sender hands this provider. Kinds with limits extend it; by default none."""
        return []

    def _require(self, *keys: str) -> None:
        for key in keys:
            if not getattr(self.settings, key):
                raise ConfigError(f"{self._where(key)}: required for kind {self.kind!r}")

    def option_bool(self, key: str) -> bool:
        return bool(self._options[key])

    def option_float(self, key: str) -> float:
        value = self._options[key]
        assert isinstance(value, float)
        return value

    def option_str(self, key: str) -> str:
        return str(self._options[key])

    @property
    def dedupes_on_ref(self) -> bool:
        """True only when the provider itself drops a second submission of our ref."""
        return self.settings.dedupes_on_ref

    def now_ms(self) -> int:
        return self._now_ms()

    def endpoint(self, path: str) -> httpx.URL:
        """``base_url`` + ``path``, parsed once per path (parsing a URL is a fifth of
        what building a request costs)."""
        known: dict[str, httpx.URL] = self.__dict__.setdefault("_endpoints", {})
        url = known.get(path)
        if url is None:
            url = known[path] = httpx.URL(self.settings.base_url.rstrip("/") + path)
        return url
