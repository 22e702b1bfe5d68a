"""Providers: each SMS provider's transport, wire format and report reader.

No database and no sending loop here: a provider's parts build the submit request, carry
it, read the answer, authenticate a callback and read the reports in it. See
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
from .registry import ADAPTERS, Providers, build_adapter, build_provider

__all__ = [
    "ADAPTERS",
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
    "Providers",
    "ReportParseError",
    "ReportReader",
    "SubmitResult",
    "Transport",
    "WireFormat",
    "build_adapter",
    "build_provider",
]
