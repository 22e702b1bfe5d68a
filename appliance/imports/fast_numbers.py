"""The fast path of :func:`appliance.imports.normalise.normalise_msisdn`.

Full ``phonenumbers.parse`` + ``is_valid_number`` manages about 20k numbers per second
per core, too slow for an import goal of 33k rows/s end to end. :func:`resolve_fast`
re-implements exactly the steps ``parse`` and ``is_valid_number`` take for a string of
ASCII digits with an optional leading ``+`` (the only thing the character check lets
through), over phonenumbers' own metadata with the regular expressions compiled once
per region and grouped by number length. It answers only "which valid number is it";
a number no reading makes valid goes back to the full path, which gives the reason.
The agreement of the two on a large generated corpus is a test
(``tests/imports/test_normalise.py``).
"""

from __future__ import annotations

import re
from typing import Final

import phonenumbers
from phonenumbers import PhoneMetadata

__all__ = ["CC_TO_REGIONS", "E164_MAX_CHARS", "E164_MIN_CHARS", "NON_GEO", "region_max_len",
           "resolve_fast"]

CC_TO_REGIONS: Final = phonenumbers.COUNTRY_CODE_TO_REGION_CODE
NON_GEO: Final = "001"
# E.164: at most 15 digits with the country code; 7 is the shortest we accept.
E164_MAX_CHARS: Final = 16
E164_MIN_CHARS: Final = 8

# _test_number_length outcomes that matter to parse.
_LEN_OK: Final = 0
_LEN_SHORT: Final = 1
_LEN_LONG: Final = 2
_LEN_LOCAL: Final = 3
_LEN_INVALID: Final = 4

_MAX_INPUT: Final = 250  # phonenumbers._MAX_INPUT_STRING_LENGTH
_MIN_NSN: Final = 2  # phonenumbers._MIN_LENGTH_FOR_NSN
_MAX_NSN: Final = 17  # phonenumbers._MAX_LENGTH_FOR_NSN
_MAX_CC_LEN: Final = 3  # phonenumbers._MAX_LENGTH_COUNTRY_CODE

_TYPE_DESCS: Final = (  # mobile and fixed-line first: the common case matches early
    "mobile",
    "fixed_line",
    "premium_rate",
    "toll_free",
    "shared_cost",
    "voip",
    "personal_number",
    "pager",
    "uan",
    "voicemail",
)


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    """For patterns upstream ignores when empty (national number, prefix for parsing)."""
    return re.compile(pattern) if pattern else None


def _compile_present(pattern: str | None) -> re.Pattern[str] | None:
    """For patterns upstream uses whenever they are not None, even when empty."""
    return None if pattern is None else re.compile(pattern)


class _Meta:
    """What the fast path needs from one PhoneMetadata, compiled."""

    __slots__ = (
        "cc",
        "cc_str",
        "e164_prefix",
        "general",
        "idd",
        "leading",
        "length_table",
        "lengths",
        "local_lengths",
        "max_len",
        "npp",
        "transform",
        "valid_by_len",
    )

    def __init__(self, md: PhoneMetadata) -> None:
        general = md.general_desc
        if md.country_code is None or general is None:  # pragma: no cover - never in the data
            raise ValueError(f"incomplete metadata for {md.id}")
        self.cc: int = md.country_code
        self.cc_str = str(md.country_code)
        self.e164_prefix = "+" + self.cc_str
        self.general = _compile(general.national_number_pattern)
        self.lengths: tuple[int, ...] = tuple(general.possible_length)
        self.local_lengths: frozenset[int] = frozenset(general.possible_length_local_only)
        self.idd = _compile_present(md.international_prefix)
        self.npp = _compile(md.national_prefix_for_parsing)
        self.transform: str | None = md.national_prefix_transform_rule or None
        self.leading = _compile_present(md.leading_digits)
        # _number_type_helper(nsn) != UNKNOWN, per length: the general description
        # must match, and then any type description whose lengths allow it. Mobile
        # only counts when its pattern differs from fixed-line's (as upstream). One
        # regex per length: a lookahead for the general pattern, then the
        # alternation of the type patterns, used with fullmatch.
        descs = [
            getattr(md, name)
            for name in _TYPE_DESCS
            if name != "mobile" or not md.same_mobile_and_fixed_line_pattern
        ]
        by_len: dict[int, re.Pattern[str]] = {}
        general_pattern = general.national_number_pattern
        if general_pattern:
            for length in range(1, _MAX_NSN + 1):
                if self.lengths and length not in self.lengths:
                    continue
                alternatives = [
                    f"(?:{d.national_number_pattern})"
                    for d in descs
                    if d is not None
                    and d.national_number_pattern
                    and (not d.possible_length or length in d.possible_length)
                ]
                if alternatives:
                    by_len[length] = re.compile(
                        f"(?=(?:{general_pattern})\\Z)(?:{'|'.join(alternatives)})"
                    )
        self.valid_by_len = by_len
        sub_lengths = [
            n
            for d in (md.fixed_line, md.mobile)
            if d is not None
            for n in d.possible_length
            if n > 0
        ]
        self.max_len: int = max(sub_lengths or [n for n in self.lengths if n > 0] or [_MAX_NSN])

        self.length_table = tuple(self._length_result(n) for n in range(_MAX_INPUT + 1))

    def length_result(self, number: str) -> int:
        """phonenumbers._test_number_length for the general description."""
        return self.length_table[len(number)]

    def _length_result(self, n: int) -> int:
        if n in self.local_lengths:
            return _LEN_LOCAL
        lengths = self.lengths
        if n == lengths[0]:
            return _LEN_OK
        if n < lengths[0]:
            return _LEN_SHORT
        if lengths[-1] < n:
            return _LEN_LONG
        return _LEN_OK if n in lengths[1:] else _LEN_INVALID

    def is_valid_nsn(self, nsn: str) -> bool:
        pattern = self.valid_by_len.get(len(nsn))
        return pattern is not None and pattern.fullmatch(nsn) is not None

    def matches_general(self, number: str) -> bool:
        return self.general is not None and self.general.fullmatch(number) is not None

    def strip_national_prefix(self, number: str) -> str:
        """phonenumbers._maybe_strip_national_prefix_carrier_code, number only."""
        npp = self.npp
        if not number or npp is None:
            return number
        m = npp.match(number)
        if m is None:
            return number
        viable = self.matches_general(number)
        groups = m.groups()
        transform = self.transform
        if transform is None or groups[-1] is None:
            rest = number[m.end() :]
            if viable and not self.matches_general(rest):
                return number
            return rest
        transformed = npp.sub(transform, number, count=1)
        if viable and not self.matches_general(transformed):
            return number
        return transformed


class _Region:
    """A default region: its metadata plus the international-reading guard."""

    __slots__ = ("code", "max_len", "meta")

    def __init__(self, code: str) -> None:
        self.code = code
        self.meta = _meta_for_region(code)
        self.max_len = self.meta.max_len


_META_BY_REGION: dict[str, _Meta] = {}
_META_BY_CC: dict[int, _Meta] = {}
_REGIONS: dict[str, _Region] = {}


def _meta_for_region(code: str) -> _Meta:
    meta = _META_BY_REGION.get(code)
    if meta is None:
        md = PhoneMetadata.metadata_for_region(code, None)
        if md is None:  # pragma: no cover - only called with supported regions
            raise KeyError(code)
        meta = _META_BY_REGION[code] = _Meta(md)
    return meta


def _meta_for_cc(cc: int) -> _Meta:
    """Metadata of the main region of a country code (or its non-geo entity)."""
    meta = _META_BY_CC.get(cc)
    if meta is None:
        main = CC_TO_REGIONS[cc][0]
        if main == NON_GEO:
            md = PhoneMetadata.metadata_for_nongeo_region(cc, None)
            if md is None:  # pragma: no cover - data always present
                raise KeyError(cc)
            meta = _Meta(md)
        else:
            meta = _meta_for_region(main)
        _META_BY_CC[cc] = meta
    return meta


def _region_data(region: str) -> _Region:
    data = _REGIONS.get(region)
    if data is None:
        data = _REGIONS[region] = _Region(region)
    return data


_CC_BY_TEXT: Final = {str(cc): cc for cc in CC_TO_REGIONS}


def _extract_cc(number: str) -> tuple[int, str]:
    """phonenumbers._extract_country_code: the shortest known prefix of 1-3 digits."""
    if number[:1] == "0":
        return (0, number)
    for i in range(1, min(len(number), _MAX_CC_LEN) + 1):
        cc = _CC_BY_TEXT.get(number[:i])
        if cc is not None:
            return (cc, number[i:])
    return (0, number)


def _valid_e164(cc: int, nsn: str) -> str | None:
    """is_valid_number for (cc, nsn): pick the region like upstream, then validate."""
    meta = _SOLE_META.get(cc)
    if meta is None:
        meta = _pick_region(cc, nsn)
        if meta is None:
            return None
    if meta.is_valid_nsn(nsn):
        e164 = meta.e164_prefix + nsn
        if E164_MIN_CHARS <= len(e164) <= E164_MAX_CHARS:
            return e164
    return None


_SOLE_META: dict[int, _Meta] = {}


def _pick_region(cc: int, nsn: str) -> _Meta | None:
    """region_code_for_number's choice among the regions sharing ``cc``."""
    regions = CC_TO_REGIONS[cc]
    if len(regions) == 1:
        meta = _SOLE_META[cc] = _meta_for_cc(cc)
        return meta
    for code in regions:
        candidate = _meta_for_region(code)
        if candidate.leading is not None:
            if candidate.leading.match(nsn) is not None:
                return candidate
        elif candidate.is_valid_nsn(nsn):
            return candidate
    return None


def _read_fast(plus: bool, digits: str, region: _Region | None) -> str | None:
    """E.164 if phonenumbers would parse ``digits`` to a valid number, else None.

    ``region`` must be None exactly when ``plus`` is set (that is how the readings
    call it). Mirrors phonenumbers.parse step by step for ASCII-digit input.
    """
    size = len(digits)
    if size + plus > _MAX_INPUT:
        return None
    if plus:
        # viability: "+" needs three digits; the IDD check needs more than two.
        if size <= _MIN_NSN:
            return None
        cc, nnn = _extract_cc(digits)
        if cc == 0:
            return None
        meta = _meta_for_cc(cc)
    else:
        if region is None or size < _MIN_NSN:
            return None
        meta = region.meta
        idd = meta.idd
        m = idd.match(digits) if idd is not None else None
        if m is not None and digits[m.end() : m.end() + 1] != "0":
            # The region's international prefix.
            full = digits[m.end() :]
            if len(full) <= _MIN_NSN:
                return None
            cc, nnn = _extract_cc(full)
            if cc == 0:
                return None
            if CC_TO_REGIONS[cc][0] != region.code:
                meta = _meta_for_cc(cc)
        else:
            cc = meta.cc
            nnn = digits
            if digits.startswith(meta.cc_str):
                without_cc = _without_own_cc(digits, meta)
                if without_cc is not None:
                    # The region's own country code without "+".
                    nnn = without_cc
                    if CC_TO_REGIONS[cc][0] != region.code:
                        meta = _meta_for_cc(cc)
    if len(nnn) < _MIN_NSN:
        return None
    potential = meta.strip_national_prefix(nnn)
    if meta.length_table[len(potential)] not in _KEEP_PREFIX:
        nnn = potential
    if len(nnn) > _MAX_NSN:
        return None
    return _valid_e164(cc, nnn)


_KEEP_PREFIX: Final = frozenset((_LEN_SHORT, _LEN_LOCAL, _LEN_INVALID))


def _without_own_cc(digits: str, meta: _Meta) -> str | None:
    """_maybe_extract_country_code for digits starting with the region's own code.

    The national number if upstream takes the leading digits as the country code,
    else None.
    """
    potential = meta.strip_national_prefix(digits[len(meta.cc_str) :])
    if not meta.matches_general(digits) and meta.matches_general(potential):
        return potential
    if meta.length_table[len(digits)] == _LEN_LONG:
        return potential
    return None


def resolve_fast(plus: bool, digits: str, region: str | None) -> str | None:
    """The readings of ``normalise._resolve_full``, on the fast path; None when none is valid."""
    if plus:
        return _read_fast(True, digits, None)
    if region is None:
        if digits.startswith("00"):
            return _read_fast(True, digits[2:], None)
        return None
    data = _REGIONS.get(region) or _region_data(region)
    found = _read_fast(False, digits, data)
    if found is not None:
        return found
    if digits.startswith("00"):
        return _read_fast(True, digits[2:], None)
    if digits[0] != "0" and len(digits) > data.max_len:
        return _read_fast(True, digits, None)
    return None



def region_max_len(region: str) -> int:
    """The longest fixed-line or mobile national number of ``region`` (a supported,
    upper-case code): digits beyond it are read as a number with its country code."""
    return _region_data(region).max_len
