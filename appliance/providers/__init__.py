"""Provider adapters: each SMS provider's wire format, and nothing else.

No database and no sending loop here: an adapter builds the submit request, reads the
answer, authenticates a callback and reads the reports in it. See ``docs/providers.md``.
"""

from .base import (
    FINAL_STATES,
    INTERMEDIATE_STATES,
    AuthError,
    CallbackRequest,
    Outcome,
    OutgoingMessage,
    ParsedReport,
    ProviderAdapter,
    ReportParseError,
    SubmitResult,
    classify_transport_error,
)
from .registry import ADAPTERS, build_adapter

__all__ = [
    "ADAPTERS",
    "FINAL_STATES",
    "INTERMEDIATE_STATES",
    "AuthError",
    "CallbackRequest",
    "Outcome",
    "OutgoingMessage",
    "ParsedReport",
    "ProviderAdapter",
    "ReportParseError",
    "SubmitResult",
    "build_adapter",
    "classify_transport_error",
]
