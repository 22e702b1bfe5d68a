"""What a provider sends us: delivery reports and inbound messages, proven and read.

A :class:`ReportReader` checks that a callback really comes from the provider
(:meth:`ReportReader.verify`) and reads the callback into :class:`ParsedReport` values.
An :class:`InboundReader` (OPS-4) reads the provider's inbound-message webhook into
:class:`InboundMessage` values, proving it with the report reader's own check.

Mapped report states: final ``DELIVERED``, ``FAILED``, ``EXPIRED``, ``REJECTED``;
intermediate ``ACCEPTED``, ``ENROUTE`` (:mod:`appliance.states`). A provider status
word an adapter does not know is kept verbatim and mapped to the intermediate
``ENROUTE``: it is recorded in the message history but can never close a message or
move it backwards.

Errors from a callback are two kinds and only two: :class:`AuthError` (the caller answers
``401`` and applies nothing) and :class:`ReportParseError` (authenticated but not
understood: the caller keeps the raw request and still answers ``2xx``).
:meth:`ReportReader.parse_reports` guarantees that nothing else escapes it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from appliance.config import ProviderSettings
from appliance.states import REPORTED_FINAL_STATES, REPORTED_INTERMEDIATE_STATES

from .outcome import short


@dataclass(frozen=True)
class CallbackRequest:
    """A callback exactly as it reached the HTTP layer.

    ``derived``: what an adapter read from it once and needs again for the same
    request (Vonage's parameters: read for the signature, the reports and the signed
    age), so that a callback's body is parsed once, not once for each; an adapter keys
    its own entries and never changes an entry's value once made."""

    method: str
    url: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


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


class ProviderPart:
    """What each part of a provider knows: its kind, name, settings and clock."""

    kind: ClassVar[str] = ""
    settings: ProviderSettings
    name: str

    def now_ms(self) -> int:
        raise NotImplementedError


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

    # The provider pushes its inbound messages to its report URL too (Verimor's panel
    # has one push URL): ``/callbacks/NAME`` files them as ``/inbound/NAME`` would.
    at_report_url: ClassVar[bool] = False

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
