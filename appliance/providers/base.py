"""What a provider is: a transport, a wire format and a report reader.

Each part is in a module of its own (:mod:`.outcome`, :mod:`.callbacks`,
:mod:`.transport`, :mod:`.adapter`, :mod:`.wire_text`); this module gathers them, so a
kind module imports what it speaks from one place. What a kind is, is its declaration
(:mod:`.kind`, listed by :mod:`.registry`).

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
check (each HTTP kind's module has its own, named by its declaration).

The HTTP kinds (:class:`ProviderAdapter` subclasses) are one class each that is both the
wire format and the report reader, since both speak the same provider's dialect and
share its settings and signatures.

Outcomes, from the money point of view: a request that never left the process is
``RETRY``; one that may have reached the provider (timeout after writing, a dropped
connection, an unreadable answer) is ``UNCERTAIN``: not resent automatically unless the
provider dedupes on our ref (``dedupes_on_ref``); a delivery report resolves it.

Mapped report states (:mod:`appliance.states`): final ``DELIVERED``, ``FAILED``,
``EXPIRED``, ``REJECTED``; intermediate ``ACCEPTED``, ``ENROUTE``. A provider status
word an adapter does not know is kept verbatim and mapped to the intermediate
``ENROUTE``: it is recorded in the message history but can never close a message or
move it backwards.

Errors from a callback are two kinds and only two: :class:`AuthError` (the caller answers
``401`` and applies nothing) and :class:`ReportParseError` (authenticated but not
understood: the caller keeps the raw request and still answers ``2xx``).
:meth:`ReportReader.parse_reports` guarantees that nothing else escapes it.
"""


from .adapter import ProviderAdapter, WireFormat
from .callbacks import (
    AuthError,
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    InboundReader,
    ParsedReport,
    ProviderPart,
    ReportParseError,
    ReportReader,
    report,
)
from .outcome import Outcome, OutgoingMessage, PartOutcome, SubmitResult, short
from .transport import Provider, SessionState, SessionTransport, Transport
from .wire_text import (
    content_type,
    decode_utf8,
    epoch_ms,
    load_json,
    parse_form,
    parse_iso_ms,
    parse_retry_after,
    secrets_equal,
    unique_params,
)

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
    "ProviderPart",
    "ReportParseError",
    "ReportReader",
    "SessionState",
    "SessionTransport",
    "SubmitResult",
    "Transport",
    "WireFormat",
    "content_type",
    "decode_utf8",
    "epoch_ms",
    "load_json",
    "parse_form",
    "parse_iso_ms",
    "parse_retry_after",
    "report",
    "secrets_equal",
    "short",
    "unique_params",
]
