"""Reading what a provider sends: strict JSON, forms, times, ``Retry-After``, and
constant-time comparison of secrets. Each raises ``ValueError`` on anything odd, so a
reader can turn it into its own parse error."""

from __future__ import annotations

import hmac
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl

# Upper bound on parameters in one form or query string: reports are small.
_MAX_FIELDS = 1000


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


def secrets_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets or signatures."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def decode_utf8(body: bytes) -> str:
    """The body as text; ``ValueError`` when it is not UTF-8."""
    return body.decode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


# Made once: ``json.loads`` with keyword arguments builds a decoder (and its scanner) for
# every call, a few microseconds a callback; ``decode`` on one is the same reading.
_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_LITERAL = json.JSONDecoder(parse_constant=_reject_constant, parse_float=str, parse_int=str)


def load_json(body: bytes, *, literal_numbers: bool = False) -> Any:
    """Strict JSON from UTF-8 bytes: no NaN/Infinity, ``ValueError`` on anything odd.

    With ``literal_numbers`` numbers stay the exact text the sender wrote (``"0.0333"``
    stays ``"0.0333"``), which is what a signature over the values was computed on.
    """
    return (_LITERAL if literal_numbers else _STRICT).decode(decode_utf8(body))


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
