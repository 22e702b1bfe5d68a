"""normalise_msisdn: the traps, the character check, its properties, and the
agreement of the fast path with phonenumbers itself on a large generated corpus."""

from __future__ import annotations

import multiprocessing
import os
import random
import re
from concurrent.futures import ProcessPoolExecutor

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneMetadata, PhoneNumberType

from appliance.imports.fast_numbers import resolve_fast
from appliance.imports.normalise import (
    Invalid,
    Normalised,
    _normalise_full,
    _precheck,
    _resolve_full,
    normalise_msisdn,
    valid_region,
)

E164 = re.compile(r"\+[1-9]\d{6,14}")
FOCUS = ["TR", "US", "GB", "DE", "IN", "BR"]
ALL_REGIONS = sorted(phonenumbers.SUPPORTED_REGIONS)


def ok(msisdn: str) -> Normalised:
    return Normalised(msisdn)


def bad(reason: str) -> Invalid:
    return Invalid(reason)


# ---------------------------------------------------------------------------
# Tables.

AYSE = "+905321234567"


@pytest.mark.parametrize(
    "raw",
    [
        "0532 123 45 67",
        "+90 532 123 4567",
        "00905321234567",
        "905321234567",
        "5321234567",
        "05321234567",
        "+905321234567",
        "(0532) 123-45-67",
        "0532.123.45.67",
        "0532/123 45 67",
        "+90 (532) 123 45 67",
        "+90 0532 123 45 67",
        "0090 532 123 45 67",
        "  0532 123 45 67\t",
    ],
)
def test_every_way_of_writing_one_turkish_mobile_is_one_msisdn(raw: str) -> None:
    assert normalise_msisdn(raw, "TR") == ok(AYSE)
    assert _normalise_full(raw, "TR") == ok(AYSE)


@pytest.mark.parametrize(
    ("raw", "region", "expected"),
    [
        # 00 is read as the international prefix even where the region's own differs.
        ("00905321234567", "US", ok(AYSE)),
        ("00447911123456", "TR", ok("+447911123456")),
        # The region's own international prefix, via phonenumbers.
        ("011 90 532 123 45 67", "US", ok(AYSE)),
        ("011 44 7911 123456", "US", ok("+447911123456")),
        # National trunk prefixes.
        ("07911 123456", "GB", ok("+447911123456")),
        ("+44 (0) 7911 123456", "GB", ok("+447911123456")),
        ("0151 23456789", "DE", ok("+4915123456789")),
        ("+91 81234 56789", "IN", ok("+918123456789")),
        ("081234 56789", "IN", ok("+918123456789")),
        ("(11) 96123-4567", "BR", ok("+5511961234567")),
        ("(212) 555-0123", "US", ok("+12125550123")),
        ("1 212 555 0123", "US", ok("+12125550123")),
        # A country code without "+": the region's own (phonenumbers) ...
        ("447911123456", "GB", ok("+447911123456")),
        # ... unless the digits are also a valid national number: the national
        # reading comes first (German numbers vary in length).
        ("4915123456789", "DE", ok("+494915123456789")),
        # ... or another one, when the digits are too long to be national.
        ("447911123456", "TR", ok("+447911123456")),
        ("4915123456789", "TR", ok("+4915123456789")),
        # Not when they could be a (mistyped) national number: no silent re-homing.
        ("4479111234", "TR", bad("not a valid number for TR")),
        ("5991234567", "TR", bad("not a valid number for TR")),
        # Region handling: lower case is fine, empty or unknown means none.
        ("05321234567", "tr", ok(AYSE)),
        ("05321234567", "", bad("no country code and no default region")),
        ("05321234567", "XX", bad("no country code and no default region")),
        ("905321234567", "", bad("no country code and no default region")),
        ("+905321234567", "", ok(AYSE)),
        ("00905321234567", "", ok(AYSE)),
        ("+1 212 555 0123", "TR", ok("+12125550123")),
        # Non-geographic country codes.
        ("+800 1234 5678", "TR", ok("+80012345678")),
    ],
)
def test_readings(raw: str, region: str, expected: Normalised | Invalid) -> None:
    assert normalise_msisdn(raw, region) == expected
    assert _normalise_full(raw, region) == expected


@pytest.mark.parametrize(
    ("raw", "region", "reason"),
    [
        ("", "TR", "empty number"),
        ("   ", "TR", "empty number"),
        ("()", "TR", "empty number"),
        ("+", "TR", "empty number"),
        ("-", "TR", "empty number"),
        ("5", "TR", "too short"),
        ("53", "TR", "too short"),
        ("+90", "TR", "too short"),
        ("+9", "TR", "too short"),
        ("0532 123 45 67 89 01", "TR", "too long"),
        ("+90 532 123 45 67 89 01 23 45", "TR", "too long"),
        ("9" * 300, "TR", "too long"),
        ("+999 1234 5678", "TR", "unknown country code"),
        ("+0532 123 45 67", "TR", "unknown country code"),
        # Possible length, not a valid number: is_valid_number, not is_possible.
        ("0200 000 00 00", "TR", "not a valid number for TR"),
        ("+90 200 000 00 00", "GB", "not a valid number for TR"),
        ("+1 099 555 0123", "TR", "not a valid number for US"),
        ("+44 7911 12345", "TR", "not a valid number for GB"),
        ("+800 0123 4567", "TR", "not a valid number for +800"),
        # Valid for phonenumbers but longer than E.164 allows.
        ("+49 30 1234567890123", "DE", "too long"),
    ],
)
def test_rejections_with_reasons(raw: str, region: str, reason: str) -> None:
    assert normalise_msisdn(raw, region) == bad(reason)
    assert _normalise_full(raw, region) == bad(reason)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("abc", "letters in number"),
        ("0532 ABC 45 67", "letters in number"),
        ("0532 123 45 67 x", "letters in number"),
        ("Ayşe", "non-ASCII characters"),
        ("=HYPERLINK(\"tel:05321234567\")", "letters in number"),
        ("=05321234567", "invalid characters"),
        ("@05321234567", "invalid characters"),
        ("0532 123 45 67 ext 12", "extension not allowed"),
        ("0532 123 45 67 ext. 12", "extension not allowed"),
        ("0532 123 45 67 EXT:12", "extension not allowed"),
        ("0532 123 45 67 extension 12", "extension not allowed"),
        ("0532 123 45 67x12", "extension not allowed"),
        ("0532 123 45 67 x 12", "extension not allowed"),
        ("0532 123 45 67;ext=12", "extension not allowed"),
        ("0532 123 45 67 #12", "extension not allowed"),
        ("0532 123 45 67 dahili 12", "extension not allowed"),
        ("x123", "letters in number"),
        ("*100#", "invalid characters"),
        ("#0532", "invalid characters"),
        ("0532;123", "invalid characters"),
        ("0532,123,45,67", "invalid characters"),
        ("0532_123_45_67", "invalid characters"),
        ("0532 123 45 67+", "misplaced +"),
        ("++90 532 123 45 67", "misplaced +"),
        ("0090+532 123 45 67", "misplaced +"),
        # Full-width and Arabic-Indic digits are refused, not converted.
        ("０５３２ １２３ ４５ ６７", "non-ASCII characters"),
        ("٠٥٣٢١٢٣٤٥٦٧", "non-ASCII characters"),
        ("＋90 532 123 45 67", "non-ASCII characters"),
        # Invisible characters: no-break space, bidi marks, zero-width space.
        ("0532\u00a0123 45 67", "non-ASCII characters"),
        ("\u200f0532 123 45 67", "non-ASCII characters"),
        ("0532 123 45 67\u200e", "non-ASCII characters"),
        ("0532\u200b1234567", "non-ASCII characters"),
        ("0532\x00123", "invalid characters"),
    ],
)
def test_character_check(raw: str, reason: str) -> None:
    assert normalise_msisdn(raw, "TR") == bad(reason)
    assert _normalise_full(raw, "TR") == bad(reason)


def test_valid_region() -> None:
    assert valid_region("TR")
    assert valid_region("tr")
    assert valid_region("Gb")
    assert not valid_region("")
    assert not valid_region("T")
    assert not valid_region("TUR")
    assert not valid_region("XX")
    assert not valid_region("ZZ")
    assert not valid_region("001")


# ---------------------------------------------------------------------------
# Properties.

REGION_TEXT = st.one_of(st.sampled_from([*FOCUS, "", "ZZ", "tr", "001"]), st.text(max_size=3))
NUMBERISH = st.text(alphabet="0123456789 +-.()/", max_size=25)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=60), NUMBERISH), REGION_TEXT)
def test_never_raises(raw: str, region: str) -> None:
    result = normalise_msisdn(raw, region)
    assert isinstance(result, Normalised | Invalid)


@st.composite
def plausible_numbers(draw: st.DrawFn) -> tuple[str, str]:
    """Example numbers with some digits changed, in the shapes people write."""
    region = draw(st.sampled_from(FOCUS + ALL_REGIONS))
    num = phonenumbers.example_number_for_type(
        region, draw(st.sampled_from([PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE]))
    )
    if num is None:
        num = phonenumbers.example_number(region)
    assert num is not None
    nsn = phonenumbers.national_significant_number(num)
    keep = draw(st.integers(min_value=1, max_value=len(nsn)))
    tail = draw(st.text(alphabet="0123456789", min_size=len(nsn) - keep, max_size=len(nsn) - keep))
    nsn = nsn[:keep] + tail
    cc = str(num.country_code)
    shapes = ["+{cc}{nsn}", "+{cc} {nsn}", "00{cc}{nsn}", "{cc}{nsn}", "0{nsn}", "{nsn}"]
    shape = draw(st.sampled_from(shapes))
    default = draw(st.sampled_from([region, region, "TR", "US", ""]))
    return shape.format(cc=cc, nsn=nsn), default


@settings(max_examples=1500, deadline=None)
@given(st.one_of(plausible_numbers(), st.tuples(NUMBERISH, REGION_TEXT)))
def test_output_is_e164_and_idempotent(case: tuple[str, str]) -> None:
    raw, region = case
    result = normalise_msisdn(raw, region)
    assert result == _normalise_full(raw, region)
    if isinstance(result, Normalised):
        assert E164.fullmatch(result.msisdn), result
        assert normalise_msisdn(result.msisdn, region) == result
        assert normalise_msisdn(result.msisdn, "") == result
        assert normalise_msisdn("00" + result.msisdn[1:], "") == result
    else:
        assert result.reason
        assert len(result.reason) <= 40


# ---------------------------------------------------------------------------
# Fast path == full path.

AGREEMENT_SIZE = 200_000
_TYPES = [
    PhoneNumberType.MOBILE,
    PhoneNumberType.FIXED_LINE,
    PhoneNumberType.TOLL_FREE,
    PhoneNumberType.PREMIUM_RATE,
    PhoneNumberType.SHARED_COST,
    PhoneNumberType.VOIP,
    PhoneNumberType.PERSONAL_NUMBER,
    PhoneNumberType.PAGER,
    PhoneNumberType.UAN,
    PhoneNumberType.VOICEMAIL,
]
_JUNK = [
    "abc",
    "0532 123 45 67 ext 5",
    "x12",
    "*100#",
    "=HYPERLINK(1)",
    "０５３２",
    "",
    "  ",
    "+",
    "++90532",
    "0532+1",
]
_SEPARATORS = ["", "", "", " ", "-", ".", "/"]


class _Templates:
    """Per region: (country code, national prefix, IDD, example NSNs)."""

    def __init__(self) -> None:
        self.by_region: dict[str, tuple[str, str, str, list[str]]] = {}
        for region in ALL_REGIONS:
            md = PhoneMetadata.metadata_for_region(region)
            assert md is not None
            nsns: list[str] = []
            for kind in _TYPES:
                num = phonenumbers.example_number_for_type(region, kind)
                if num is not None:
                    nsns.append(phonenumbers.national_significant_number(num))
            idd = md.preferred_international_prefix or md.international_prefix or "00"
            if not idd.isdigit():
                idd = "00"
            self.by_region[region] = (str(md.country_code), md.national_prefix or "", idd, nsns)
        self.non_geo: list[tuple[str, str]] = []
        for cc in sorted(phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS):
            num = phonenumbers.example_number_for_non_geo_entity(cc)
            if num is not None:
                self.non_geo.append((str(cc), phonenumbers.national_significant_number(num)))


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _spaced(rng: random.Random, s: str) -> str:
    sep = rng.choice(_SEPARATORS)
    if not sep or len(s) < 4:
        return s
    cut = rng.randrange(1, len(s) - 1)
    return s[:cut] + sep + s[cut:]


def _mutate(rng: random.Random, d: str) -> str:
    if len(d) < 2:
        return d
    i = rng.randrange(1, len(d))
    kind = rng.randrange(5)
    if kind == 0:
        return d[:i] + rng.choice("0123456789") + d[i + 1 :]
    if kind == 1:
        return d[:i] + d[i + 1 :]
    if kind == 2:
        return d[:i] + rng.choice("0123456789") + d[i:]
    if kind == 3:
        return d + _digits(rng, rng.randrange(1, 4))
    return d[: max(1, len(d) - rng.randrange(1, 4))]


def agreement_corpus(size: int, seed: int) -> list[tuple[str, str]]:
    """(raw, default region) pairs: numbers of every region in every shape, edited
    numbers, random digit strings, and junk. Seeded, so failures reproduce."""
    rng = random.Random(seed)
    t = _Templates()
    out: list[tuple[str, str]] = []
    while len(out) < size:
        roll = rng.random()
        region = rng.choice(FOCUS) if rng.random() < 0.5 else rng.choice(ALL_REGIONS)
        default = region
        if roll < 0.7:
            cc, trunk, idd, nsns = t.by_region[region]
            if not nsns:
                continue
            nsn = rng.choice(nsns)
            keep = rng.randrange(max(1, len(nsn) // 2), len(nsn) + 1)
            nsn = nsn[:keep] + _digits(rng, len(nsn) - keep)
            if rng.random() < 0.15:
                nsn = _mutate(rng, nsn)
            shape = rng.randrange(8)
            raw = [
                f"+{cc}{nsn}",
                f"00{cc}{nsn}",
                f"{idd}{cc}{nsn}",
                f"{cc}{nsn}",
                f"{trunk}{nsn}",
                nsn,
                f"+{cc}{trunk}{nsn}",
                f"{cc}{trunk}{nsn}",
            ][shape]
            raw = _spaced(rng, raw)
            if rng.random() < 0.25:
                default = rng.choice(FOCUS)
        elif roll < 0.75:
            cc, nsn = rng.choice(t.non_geo)
            raw = rng.choice([f"+{cc}{nsn}", f"00{cc}{nsn}", f"{cc}{nsn}"])
            if rng.random() < 0.5:
                raw = _mutate(rng, raw)
        elif roll < 0.97:
            prefix = rng.choice(["", "", "+", "00", "0", "011", "8", "810", "1"])
            raw = prefix + _digits(rng, rng.randrange(1, 19))
        else:
            raw = rng.choice(_JUNK)
        r = rng.random()
        if r < 0.03:
            default = ""
        elif r < 0.04:
            default = "ZZ"
        out.append((raw, default))
    return out


def _compare(corpus: list[tuple[str, str]]
             ) -> tuple[int, list[tuple[str, str, str | None, Normalised | Invalid]]]:
    """(numbers the fast path read as valid, readings that differ) over ``corpus``."""
    mismatches: list[tuple[str, str, str | None, Normalised | Invalid]] = []
    valid = 0
    for raw, region in corpus:
        pre = _precheck(raw)
        if isinstance(pre, Invalid):
            continue
        plus, digits = pre
        code = region.upper() if valid_region(region) else None
        fast = resolve_fast(plus, digits, code)
        full = _resolve_full(plus, digits, code)
        if fast is None:
            agree = isinstance(full, Invalid)
        else:
            valid += 1
            agree = full == Normalised(fast)
        if not agree:
            mismatches.append((raw, region, fast, full))
    return valid, mismatches


@pytest.mark.slow
def test_fast_path_agrees_with_phonenumbers() -> None:
    """Every reading of the fast path gives phonenumbers' own answer.

    Compares the readings themselves (``resolve_fast`` vs ``_resolve_full``), so a
    fast path that wrongly says "not valid" is caught too, not hidden by the
    fallback. Most of the time goes to phonenumbers (the full path), so the corpus is
    shared out over the machine's cores.
    """
    corpus = agreement_corpus(AGREEMENT_SIZE, seed=20240601)
    workers = max(1, min(4, os.cpu_count() or 1))
    shares = [corpus[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(_compare, shares))
    valid = sum(v for v, _ in results)
    mismatches = [m for _, ms in results for m in ms]
    assert mismatches == []
    # The corpus exercises both outcomes in earnest.
    assert valid > AGREEMENT_SIZE // 4
    assert valid < AGREEMENT_SIZE * 3 // 4
    # And the public function is wired to the same result.
    for raw, region in corpus[:10_000]:
        assert normalise_msisdn(raw, region) == _normalise_full(raw, region), (raw, region)
