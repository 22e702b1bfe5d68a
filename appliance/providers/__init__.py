"""Providers: each SMS provider's transport, wire format and report reader.

No database and no sending loop here: a provider's parts build the submit request, carry
it, read the answer, authenticate a callback and read the reports in it. Each kind is
declared once (:class:`ProviderKind`) and listed in
:data:`appliance.provider_kinds.KINDS`, above this package and the SMPP one. See
``docs/providers.md``.
"""

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
    Provider,
    ProviderAdapter,
    ReportParseError,
    ReportReader,
    SubmitResult,
    Transport,
    WireFormat,
)
from .kind import ProviderKind, Shape
from .registry import Providers, build_adapter, build_provider
from .transport import SessionState, SessionTransport

__all__ = [
    "AuthError",
    "CallbackRequest",
    "InboundMessage",
    "InboundParseError",
    "InboundReader",
    "Outcome",
    "OutgoingMessage",
    "ParsedReport",
    "PartOutcome",
    "Provider",
    "ProviderAdapter",
    "ProviderKind",
    "Providers",
    "ReportParseError",
    "ReportReader",
    "SessionState",
    "SessionTransport",
    "Shape",
    "SubmitResult",
    "Transport",
    "WireFormat",
    "build_adapter",
    "build_provider",
]
