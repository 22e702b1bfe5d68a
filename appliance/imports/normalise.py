"""Normalise one phone-number cell to E.164, or say precisely why it can't be.

``normalise_msisdn(raw, region)`` is the single decision point for "is this a number
we can send to, and which one is it". Its result is the deduplication key of an
imported list (IMP-5), so every way of writing the same number must give the same
string: ``0532 123 45 67``, ``+90 532 123 4567`` and ``00905321234567`` (region TR)
are all ``+905321234567``.

Rules, in order:

1. **Strict character check.** After stripping surrounding ASCII whitespace the cell
   may only contain ASCII digits, spaces, ``- . ( ) /`` and one ``+`` as its first
   character. Separators are cosmetic: they are removed and play no further part.
   Anything else is rejected with a specific reason: a number followed by an
   extension (``… ext 12``, ``… x123``, ``… #12``, ``…;ext=12``, ``… dahili 12``)
   → "extension not allowed";
   letters → "letters in number"; any non-ASCII character (full-width digits,
   Arabic-Indic digits, no-break spaces, bidi marks) → "non-ASCII characters"
   (rejected rather than silently converted: invisible or look-alike characters
   usually mean the cell is not what the user thinks, and the reject report says
   which line to fix); a ``+`` anywhere but first → "misplaced +"; other symbols
   (``*``, ``#``, ``;``, ``=``, ``,``) → "invalid characters"; no digit at all →
   "empty number".
2. **Readings.** The remaining digits are read with phonenumbers, and the number
   must pass ``is_valid_number`` (a possible length is not enough) and fit E.164:
   7 to 15 digits with the country code (longer valid numbers exist, e.g. German
   extensions, but no phone can receive an SMS there):

   * ``+`` first: international, the default region is ignored.
   * otherwise, read nationally for the default region. phonenumbers handles the
     region's own international prefix (``00`` for TR, ``011`` for US), the
     national trunk prefix (``0532…`` in TR) and the region's own country code
     written without ``+`` (``905321234567`` in TR).
   * if that is not valid and the digits start with ``00``: read ``00`` as the
     international prefix (``+`` + the rest), whatever the region's own prefix is.
   * if that is not valid, the digits do not start with ``0`` and they are longer
     than any fixed-line or mobile number of the region: read them as a number
     with its country code but without the ``+`` (``447911123456`` in TR). The
     length guard keeps a mistyped national number from being silently accepted
     as a number in another country.
   * with no (or an unknown) default region only ``+`` and ``00`` numbers can be
     read; bare digits → "no country code and no default region".

   The first valid reading wins. If none is valid, the reason is the one from the
   first reading: "too short", "too long", "unknown country code", or
   "not a valid number for XX" (XX the main region of the country code, or
   ``+800``-style for non-geographic codes).

Speed: full ``phonenumbers.parse`` + ``is_valid_number`` manages about 20k numbers
per second per core, too slow for an import goal of 33k rows/s end to end. The fast
path (:func:`appliance.imports.fast_numbers.resolve_fast`) re-implements exactly the
steps ``parse`` and ``is_valid_number`` take for the strings rule 1 lets through. Only a
number that no reading makes valid falls back to the full path (``_normalise_full``),
which is what produces the reason. The agreement of the two on a large generated
corpus is a test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import phonenumbers
from phonenumbers import NumberParseException, PhoneNumberFormat, ValidationResult

from appliance.imports.fast_numbers import (
    E164_MAX_CHARS,
    E164_MIN_CHARS,
    NON_GEO,
    region_max_len,
    resolve_fast,
)

# Keep phonenumbers' compiled metadata patterns instead of leaning on the re
# module's 512-entry cache: the full path over numbers of many regions otherwise
# spends most of its time recompiling (measured: 5x slower). Bounded by the
# metadata; process-wide, and harmless to any other phonenumbers user.
phonenumbers.enable_pattern_cache()

__all__ = ["Invalid", "Normalised", "normalise_msisdn", "valid_region"]


@dataclass(frozen=True, slots=True)
class Normalised:
    """A valid number in E.164 form, e.g. ``+905321234567``."""

    msisdn: str


@dataclass(frozen=True, slots=True)
class Invalid:
    """A rejected number; ``reason`` is short, stable and meant for people."""

    reason: str


EMPTY: Final = Invalid("empty number")
LETTERS: Final = Invalid("letters in number")
EXTENSION: Final = Invalid("extension not allowed")
NON_ASCII: Final = Invalid("non-ASCII characters")
MISPLACED_PLUS: Final = Invalid("misplaced +")
BAD_CHARS: Final = Invalid("invalid characters")
TOO_SHORT: Final = Invalid("too short")
TOO_LONG: Final = Invalid("too long")
UNKNOWN_CC: Final = Invalid("unknown country code")
NO_REGION: Final = Invalid("no country code and no default region")

# ---------------------------------------------------------------------------
# Rule 1: the character check.

_ASCII_WS: Final = " \t\r\n\v\f"
_NUMBER_SHAPE: Final = re.compile(r"\+?[0-9 ()./\-]*")
_SEPARATOR_CHARS: Final = (" ", "-", "(", ")", ".", "/", "+")
_EXTENSION_TAIL: Final = re.compile(
    r"(?:e?xt(?:ension|n)?|x|\#|;?ext=|dahili|dah)\s*[.:=]?\s*[0-9]{1,20}\#?\s*$",
    re.IGNORECASE | re.ASCII,
)
_ASCII_LETTER: Final = re.compile(r"[A-Za-z]")


def _precheck(raw: str) -> tuple[bool, str] | Invalid:
    """Return ``(has_plus, digits)`` for an acceptable cell, else the rejection."""
    s = raw.strip(_ASCII_WS)
    if s.isdigit() and s.isascii():
        return (False, s)
    if _NUMBER_SHAPE.fullmatch(s) is None:
        return _classify_bad(s)
    digits = _strip_separators(s)
    if not digits:
        return EMPTY
    return (s[0] == "+", digits)


def _strip_separators(s: str) -> str:
    """Drop the separators _NUMBER_SHAPE allows (``str.replace`` beats translate)."""
    for sep in _SEPARATOR_CHARS:
        if sep in s:
            s = s.replace(sep, "")
    return s


def _classify_bad(s: str) -> Invalid:
    if not s.isascii():
        return NON_ASCII
    tail = _EXTENSION_TAIL.search(s)
    if tail is not None:
        number = s[: tail.start()].rstrip(" \t,;")
        if _NUMBER_SHAPE.fullmatch(number) and any(ch.isdigit() for ch in number):
            return EXTENSION
    if _ASCII_LETTER.search(s) is not None:
        return LETTERS
    if "+" in s and _NUMBER_SHAPE.fullmatch(s.replace("+", "")) is not None:
        return MISPLACED_PLUS
    return BAD_CHARS


# ---------------------------------------------------------------------------
# Regions.

_SUPPORTED: Final = frozenset(phonenumbers.SUPPORTED_REGIONS)


def valid_region(region: str) -> bool:
    """Is ``region`` a two-letter region phonenumbers knows? Case-insensitive."""
    return len(region) == 2 and region.upper() in _SUPPORTED


_KNOWN_SPELLINGS: dict[str, str] = {}


def _region_or_none(region: str) -> str | None:
    """The upper-case region code, or None for an empty or unknown region."""
    known = _KNOWN_SPELLINGS.get(region)
    if known is not None:
        return known
    if len(region) != 2:
        return None
    up = region.upper()
    if up not in _SUPPORTED:
        return None
    _KNOWN_SPELLINGS[region] = up  # bounded: a few spellings of ~250 codes
    return up


# ---------------------------------------------------------------------------
# Full path: phonenumbers itself.


def _reason_for_parse_error(error_type: int) -> Invalid:
    if error_type == NumberParseException.INVALID_COUNTRY_CODE:
        return UNKNOWN_CC
    if error_type == NumberParseException.TOO_LONG:
        return TOO_LONG
    # TOO_SHORT_AFTER_IDD, TOO_SHORT_NSN, and NOT_A_NUMBER, which for a string of
    # digits only happens when there are too few of them.
    return TOO_SHORT


def _read_full(text: str, region: str | None) -> Normalised | Invalid:
    try:
        num = phonenumbers.parse(text, region)
    except NumberParseException as exc:
        return _reason_for_parse_error(exc.error_type)
    if phonenumbers.is_valid_number(num):
        e164 = phonenumbers.format_number(num, PhoneNumberFormat.E164)
        if len(e164) > E164_MAX_CHARS:
            return TOO_LONG
        if len(e164) < E164_MIN_CHARS:
            return TOO_SHORT
        return Normalised(e164)
    possible = phonenumbers.is_possible_number_with_reason(num)
    if possible == ValidationResult.TOO_SHORT:
        return TOO_SHORT
    if possible == ValidationResult.TOO_LONG:
        return TOO_LONG
    if possible == ValidationResult.INVALID_COUNTRY_CODE:
        return UNKNOWN_CC
    cc = num.country_code or 0
    main = phonenumbers.region_code_for_country_code(cc)
    where = f"+{cc}" if main == NON_GEO else main
    return Invalid(f"not a valid number for {where}")


def _resolve_full(plus: bool, digits: str, region: str | None) -> Normalised | Invalid:
    if plus:
        return _read_full("+" + digits, None)
    if region is None:
        if digits.startswith("00"):
            return _read_full("+" + digits[2:], None)
        return NO_REGION
    national = _read_full(digits, region)
    if isinstance(national, Normalised):
        return national
    if digits.startswith("00"):
        other = _read_full("+" + digits[2:], None)
    elif digits[0] != "0" and len(digits) > region_max_len(region):
        other = _read_full("+" + digits, None)
    else:
        return national
    return other if isinstance(other, Normalised) else national


def _normalise_full(raw: str, region: str) -> Normalised | Invalid:
    """Reference implementation: rule 1, then phonenumbers for every reading."""
    pre = _precheck(raw)
    if isinstance(pre, Invalid):
        return pre
    return _resolve_full(pre[0], pre[1], _region_or_none(region))


def normalise_msisdn(raw: str, region: str) -> Normalised | Invalid:
    """Normalise one number cell; ``region`` is the default region, e.g. ``"TR"``.

    An unknown or empty region means "no default region". Never raises.
    """
    pre = _precheck(raw)
    if isinstance(pre, Invalid):
        return pre
    plus, digits = pre
    reg = _KNOWN_SPELLINGS.get(region) or _region_or_none(region)
    found = resolve_fast(plus, digits, reg)
    if found is not None:
        return Normalised(found)
    return _resolve_full(plus, digits, reg)
