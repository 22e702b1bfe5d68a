"""The checks every import submission passes before it is stored (IMP-1, IMP-2).

Shared by the HTTP endpoint and ``appliance import``: size, encoding, line count,
list name, region. Each refusal carries the HTTP status and the JSON fields the
API documents, so the terminal and the API say the same thing.
"""

from __future__ import annotations

from typing import Any

from appliance.config import ImportSettings
from appliance.imports.lines import PayloadEncodingError, count_lines, decode_payload
from appliance.imports.normalise import valid_region

MAX_LIST_NAME = 100


class Refused(Exception):
    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.extra = extra


def too_large(limit: int) -> Refused:
    return Refused(
        413, "payload_too_large",
        f"the list is larger than the limit of {limit} bytes; split it and send it in parts",
        limit=limit,
    )


def check_list_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise Refused(422, "invalid_list", "give the list name ('list')")
    cleaned = name.strip()
    if len(cleaned) > MAX_LIST_NAME or any(ord(ch) < 32 for ch in cleaned):
        raise Refused(422, "invalid_list",
                      f"list names are 1 to {MAX_LIST_NAME} printable characters")
    return cleaned


def check_region(region: Any, default: str) -> str:
    if region is None or region == "":
        return default
    if not isinstance(region, str) or not valid_region(region):
        raise Refused(422, "invalid_region",
                      f"region {region!r} is not a two-letter country code (e.g. TR, GB, US)")
    return region.upper()


def count_payload_lines(payload: bytes, limits: ImportSettings) -> int:
    """Lines in the payload, after the byte, encoding, emptiness and row checks."""
    if len(payload) > limits.max_bytes:
        raise too_large(limits.max_bytes)
    try:
        if payload[:2] in (b"\xff\xfe", b"\xfe\xff"):
            decode_payload(payload)  # UTF-16 with a BOM: validate; count_lines reads it too
        else:
            payload.decode("utf-8")
        total = count_lines(payload)
    except UnicodeDecodeError as exc:
        raise Refused(
            400, "invalid_encoding",
            f"the list is not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8",
        ) from None
    except PayloadEncodingError as exc:
        raise Refused(400, "invalid_encoding", str(exc)) from None
    if total > limits.max_rows:
        raise Refused(
            413, "too_many_rows",
            f"This list has {total} lines. The limit is {limits.max_rows}."
            " Split the list and send it in parts.",
            limit=limits.max_rows, submitted=total,
        )
    if total == 0 or not payload.strip(b" \t\r\n\xef\xbb\xbf\xff\xfe\x00"):
        raise Refused(422, "empty_list", "the list is empty: paste at least one number")
    return total
