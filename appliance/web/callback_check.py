"""A callback's checks between its body and the write unit, and what is done with the
writer's receipt: shared by the server's route (:mod:`appliance.web.callbacks`) and the
report intake process (:mod:`appliance.web.intake_app`), which answers the same way on
its own port.

:func:`reader_for` finds the provider's report reader (or the refusal), :func:`check`
verifies the callback (``401``, nothing stored) and reads its reports (a body that
cannot be read is kept raw, with the reason), :func:`note_receipt` writes the log
lines of a stored callback and :func:`refusal` answers a refusal as providers are
answered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.responses import JSONResponse, Response

from appliance.config import ConfigError
from appliance.inbound.store import InboundReceipt, InboundRules, receive_request
from appliance.logs import SampledLine
from appliance.providers import (
    AuthError,
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    ReportParseError,
)
from appliance.providers.base import InboundReader, ReportReader
from appliance.providers.registry import Providers
from appliance.reports.apply import Receipt, receive
from appliance.reports.inbox import InboxReport, RawCallback, from_parsed, storable
from appliance.store.connection import Connection
from appliance.web.errors import ApiError

log = logging.getLogger("appliance.callbacks")
INBOUND_LOG = logging.getLogger("appliance.inbound")
# The line the field note counts: a report whose message we cannot match yet. Under a
# race there are thousands a minute, so each provider's are summed up every 10 s.
UNKNOWN_REPORT = SampledLine(log, "unknown report", interval_s=10.0, detail_key="ref")
TOO_LARGE = ApiError(413, "payload_too_large", "callback body too large")
TRY_AGAIN = ApiError(503, "not_stored", "try again", retry_after=5)


@dataclass(frozen=True)
class Checked:
    """A callback the provider's adapter verified and read: what the write unit takes,
    and what to answer once it is committed."""

    provider: str
    raw: RawCallback
    reports: list[InboxReport]
    parse_error: str | None
    answer: tuple[int, bytes, str]  # the adapter's (status, body, content type)
    signed_age_s: float | None
    # Inbound messages pushed to the report URL (a kind whose inbound reader is
    # ``at_report_url``), or why those could not be read; filed as ``/inbound`` files.
    inbound: list[InboundMessage] = field(default_factory=list)
    inbound_error: str | None = None


def reader_for(providers: Providers, name: str) -> ReportReader:
    """Provider ``name``'s report reader; the refusal to answer when there is none."""
    try:
        provider = providers.get(name)
    except ConfigError as exc:
        log.error("callback for provider %s cannot be checked: %s", name, exc)
        raise ApiError(503, "provider_misconfigured",
                       "this provider's settings cannot check callbacks",
                       retry_after=60) from None
    if provider is None:
        raise ApiError(404, "not_found", "no such provider")
    if provider.reports is None:
        raise ApiError(404, "not_found",
                       "this provider reports over its own session, not by callback")
    return provider.reports


def inbound_reader_for(providers: Providers, name: str) -> InboundReader | None:
    """Provider ``name``'s inbound reader when its kind pushes inbound messages to the
    report URL too; ``None`` otherwise (call after :func:`reader_for`)."""
    provider = providers.get(name)
    inbound = provider.inbound if provider is not None else None
    return inbound if inbound is not None and inbound.at_report_url else None


def check(reader: ReportReader, name: str, method: str, url: str, query: str,
          headers: Mapping[str, str], body: bytes,
          inbound: InboundReader | None = None) -> Checked:
    """Verify the callback (``401`` refused, nothing stored) and read its reports, and
    with ``inbound`` the inbound messages it carries; a body that cannot be read is
    still kept, raw, with the reason."""
    req = CallbackRequest(method=method, url=url, query=query, headers=dict(headers),
                          body=body)
    try:
        reader.verify(req)
    except AuthError as exc:
        log.warning("callback for provider %s refused: %s", name, exc)
        raise ApiError(401, "unauthorized", "not authenticated") from None
    parse_error: str | None = None
    reports: list[InboxReport] = []
    try:
        reports = [from_parsed(name, p) for p in reader.parse_reports(req)]
    except ReportParseError as exc:
        parse_error = str(exc) or "unreadable"
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        # A body the adapter did not expect at all: kept raw like any unparsable one.
        parse_error = f"unreadable ({type(exc).__name__})"
    if parse_error is None and not storable(reports):
        parse_error, reports = "a report field is not valid Unicode text", []
    raw = RawCallback(provider=name, method=method,
                      content_type=headers.get("content-type", ""), query=query, body=body)
    messages: list[InboundMessage] = []
    inbound_error: str | None = None
    if inbound is not None and parse_error is None:
        try:
            messages = inbound.parse_inbound(req)
        except InboundParseError as exc:
            inbound_error = str(exc) or "unreadable"
    return Checked(name, raw, reports, parse_error, reader.callback_response(),
                   reader.signed_age_s(req), messages, inbound_error)


def receive_push(conn: Connection, rules: InboundRules | None, raw: RawCallback,
                 reports: list[InboxReport], parse_error: str | None,
                 inbound: list[InboundMessage], inbound_error: str | None, now_ms: int
                 ) -> tuple[Receipt, InboundReceipt | None]:
    """A callback's write unit: the raw callback and its reports
    (:func:`~appliance.reports.apply.receive`), then, when it carries inbound messages
    (or some that cannot be read), the same body as an inbound request, filed and its
    STOPs honoured as at ``/inbound/NAME`` (``rules``: given exactly then, so a
    callback of reports alone does not build them), in the same transaction."""
    receipt = receive(conn, raw, reports, parse_error, now_ms)
    if rules is None or (not inbound and inbound_error is None):
        return receipt, None
    return receipt, receive_request(conn, rules, raw, inbound, inbound_error, now_ms)


def note_inbound(name: str, receipt: InboundReceipt | None) -> None:
    """The log lines of a stored inbound request: kept raw unread, or opt-outs in it."""
    if receipt is None:
        return
    if receipt.error is not None:
        INBOUND_LOG.warning("inbound request %s from %s kept raw, not read: %s",
                            receipt.raw_id, name, receipt.error)
    for result in receipt.results:
        if result.keyword is not None and not result.duplicate:
            INBOUND_LOG.info("opt-out received",
                             extra={"provider": name, "inbound_id": result.inbound_id,
                                    "keyword": result.keyword,
                                    "accounts": len(result.suppressed_for)})


def note_receipt(name: str, receipt: Receipt) -> None:
    """The log lines of a stored callback: its reports left waiting, a body kept raw."""
    for ref in receipt.waiting:
        # Kept in the inbox; the reconciler applies it when the message appears.
        UNKNOWN_REPORT.note(name, ref, provider=name)
    if receipt.error is not None:
        log.warning("callback %s from %s kept raw, not interpreted: %s", receipt.raw_id, name,
                    receipt.error)


def refusal(exc: ApiError) -> Response:
    """A refusal as a provider is answered: JSON ``{"error", "message"}``, with
    ``Retry-After`` where sending again later helps."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse({"error": exc.error, "message": exc.message}, status_code=exc.status,
                        headers=headers)
