"""The checks of a number to suppress, a reason, and a search of the list (API and console).

Each raises :class:`~appliance.refusals.Invalid` with the code the API answers
(``invalid_msisdn``, ``invalid_reason``: ``docs/api.md``).
"""

from __future__ import annotations

import re
from typing import Any

from appliance.config import Settings
from appliance.imports.normalise import Invalid as InvalidNumber
from appliance.imports.normalise import normalise_msisdn
from appliance.optout.suppressions import MAX_REASON_CHARS
from appliance.refusals import Invalid

MAX_MSISDN_CHARS = 64
_NOT_DIGIT = re.compile(r"[^0-9]")


def check_msisdn(settings: Settings, value: Any, field: str = "msisdn") -> str:
    """A number to suppress, as E.164 (the default region applies)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_MSISDN_CHARS:
        raise Invalid("invalid_msisdn", f"'{field}' must be a phone number string")
    found = normalise_msisdn(value, settings.imports.default_region)
    if isinstance(found, InvalidNumber):
        raise Invalid("invalid_msisdn", f"'{field}' is not a phone number: {found.reason}",
                      reason=found.reason)
    return found.msisdn


def check_reason(value: Any) -> str:
    """Why the number is suppressed: a string of at most :data:`MAX_REASON_CHARS`."""
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value:
        raise Invalid("invalid_reason", "'reason' must be a string")
    if len(value) > MAX_REASON_CHARS:
        raise Invalid("invalid_reason", f"'reason' is at most {MAX_REASON_CHARS} characters")
    return value.strip()


def search_terms(settings: Settings, raw: str | None) -> tuple[str | None, str | None]:
    """``?msisdn=`` as ``(exact number, digits to look for)``: a whole number is matched
    exactly (any way of writing it), a fragment by its digits."""
    if raw is None or not raw.strip():
        return None, None
    if len(raw) > MAX_MSISDN_CHARS:
        raise Invalid("invalid_msisdn", "'msisdn' is too long")
    found = normalise_msisdn(raw, settings.imports.default_region)
    if not isinstance(found, InvalidNumber):
        return found.msisdn, None
    digits = _NOT_DIGIT.sub("", raw)
    if not digits:
        raise Invalid("invalid_msisdn", "'msisdn' must hold a number or some of its digits")
    return None, digits
