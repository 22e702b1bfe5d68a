"""The link between the server and its report intake process: pickled frames over a
Unix socket pair, each its length (4 bytes, big-endian) and then the pickle.

From the intake: ``("store", ident, provider, raw, reports, parse_error, signed_age_s,
inbound, inbound_error)`` for each verified callback (the raw callback and its reports
as plain tuples of their fields, :func:`callback_fields`: a frozen dataclass pickles
and unpickles at ~9 µs each way, its fields as a tuple at under 1 µs; the server
builds them again with :func:`callback_of`), ``("requests", [(method, status, seconds), ...])``, the
intake's requests since the last such frame, and ``("edge", open_connections,
{reason: refusals}, body_bytes_held, budget_refusals)`` when those changed (both for
``/metrics``). From the server:
``("stored", [(ident, ok), ...])`` once the write units are committed (``ok``) or
failed.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

from appliance.providers import InboundMessage
from appliance.reports.inbox import InboxReport, RawCallback

FRAME = struct.Struct("!I")
RawFields = tuple[str, str, str, str, bytes]
ReportFields = tuple[str, str, str, str, int, str, str | None, str]


def callback_fields(raw: RawCallback, reports: list[InboxReport]
                    ) -> tuple[RawFields, list[ReportFields]]:
    """The raw callback and its reports as the link carries them: their fields, in the
    order the dataclasses declare them (a test holds the two together)."""
    return ((raw.provider, raw.method, raw.content_type, raw.query, raw.body),
            [(r.provider, r.ref, r.provider_msg_id, r.status, r.reported_at, r.state,
              r.error_code, r.source) for r in reports])


def callback_of(message: tuple[Any, ...]
                ) -> tuple[int, str, RawCallback, list[InboxReport], str | None,
                           float | None, list[InboundMessage], str | None]:
    """A ``store`` frame's callback, as the write unit takes it."""
    _, ident, provider, raw, reports, parse_error, signed_age_s, inbound, inbound_error = (
        message)
    return (ident, provider, RawCallback(*raw), [InboxReport(*r) for r in reports],
            parse_error, signed_age_s, inbound, inbound_error)


def frame(message: tuple[Any, ...]) -> bytes:
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(blob)) + blob


def frames(buffer: bytearray) -> list[tuple[Any, ...]]:
    """The whole frames at the start of ``buffer`` (taken out of it)."""
    out: list[tuple[Any, ...]] = []
    at = 0
    while len(buffer) - at >= FRAME.size:
        (size,) = FRAME.unpack_from(buffer, at)
        if len(buffer) - at - FRAME.size < size:
            break
        out.append(pickle.loads(buffer[at + FRAME.size:at + FRAME.size + size]))
        at += FRAME.size + size
    del buffer[:at]
    return out
