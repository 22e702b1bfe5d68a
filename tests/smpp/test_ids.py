"""SMSC ids in one canonical form: a receipt finds its part whatever base it is written in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.smpp.ids import IdEvidence, IdFormat, IdReader, key

VALUES = st.integers(min_value=0, max_value=2**40)
CONVENTIONS = st.sampled_from([("decimal", "decimal"), ("hex", "hex"), ("hex", "decimal")])


@st.composite
def written(draw: st.DrawFn, value: int, base: str) -> str:
    """``value`` as an SMSC might write it: any case, some leading zeros."""
    text = f"{value:x}" if base == "hex" else str(value)
    if draw(st.booleans()):
        text = text.upper()
    return "0" * draw(st.integers(0, 4)) + text


def warmed(fmt: str, resp_base: str, text_base: str) -> IdReader:
    """A reader that has seen one id with a letter on each hexadecimal side."""
    reader = IdReader(fmt)  # type: ignore[arg-type]
    sample = 0xABCDEF
    reader.submit_key(f"{sample:x}" if resp_base == "hex" else str(sample))
    reader.receipt_key(None, f"{sample:X}" if text_base == "hex" else str(sample))
    return reader


@given(CONVENTIONS, st.lists(VALUES, min_size=1, max_size=30, unique=True), st.data())
def test_auto_matches_every_convention(convention: tuple[str, str], values: list[int],
                                       data: st.DataObject) -> None:
    resp_base, text_base = convention
    reader = warmed("auto", resp_base, text_base)
    keys = set()
    for value in values:
        resp = data.draw(written(value, resp_base))
        text = data.draw(written(value, text_base))
        tlv = data.draw(written(value, resp_base))
        k = reader.submit_key(resp)
        assert reader.receipt_key(None, text) == k  # text only
        assert reader.receipt_key(tlv, text) == k  # both: the TLV wins, the pair teaches
        keys.add(k)
    assert len(keys) == len(values)  # distinct ids never share a key


@given(st.lists(VALUES, min_size=1, max_size=30, unique=True), st.data())
def test_auto_needs_no_evidence_for_decimal_smscs(values: list[int], data: st.DataObject) -> None:
    reader = IdReader("auto")
    for value in values:
        assert reader.submit_key(data.draw(written(value, "decimal"))) == reader.receipt_key(
            None, data.draw(written(value, "decimal")))
    assert reader.evidence == IdEvidence()


@given(VALUES, st.data())
def test_explicit_bases_ignore_case_and_leading_zeros(value: int, data: st.DataObject) -> None:
    fmts: tuple[IdFormat, ...] = ("hex", "decimal")
    for fmt in fmts:
        a, b = data.draw(written(value, fmt)), data.draw(written(value, fmt))
        assert key(a, fmt) == key(b, fmt) == str(value)


@given(st.text(min_size=1, max_size=20).filter(lambda t: t.strip(" \x00") == t), st.text(
    min_size=1, max_size=20).filter(lambda t: t.strip(" \x00") == t))
def test_as_is_compares_exactly(a: str, b: str) -> None:
    assert (key(a, "as-is") == key(b, "as-is")) == (a == b)


def test_a_digit_only_hex_id_is_read_as_hex_once_the_smsc_is_known_to_answer_hex() -> None:
    reader = IdReader("auto")
    assert reader.submit_key("1234") == "1234"  # nothing known yet: decimal
    reader.submit_key("00ab12")
    assert reader.evidence.submit_hex
    assert reader.submit_key("1234") == "4660"
    assert reader.receipt_key(None, "0000004660") == "4660"  # decimal in the text


def test_text_ids_become_hex_when_the_text_repeats_the_hex_tlv_id() -> None:
    reader = IdReader("auto", IdEvidence(submit_hex=True))
    assert reader.receipt_key(None, "1234") == "1234"
    reader.receipt_key("1234", "1234")
    assert reader.evidence.text_hex
    assert reader.receipt_key(None, "1234") == "4660" == reader.submit_key("1234")


@pytest.mark.parametrize(("raw", "fmt", "expected"), [
    (" 1A2B\x00", "auto", "6699"), ("6699", "auto", "6699"), ("00000", "auto", "0"),
    ("abc-DEF-9", "auto", "abc-def-9"), ("abc-DEF-9", "as-is", "abc-DEF-9"),
    ("xyz", "hex", "xyz"), ("12ab", "decimal", "12ab"),
])
def test_keys(raw: str, fmt: str, expected: str) -> None:
    assert key(raw, fmt) == expected  # type: ignore[arg-type]
