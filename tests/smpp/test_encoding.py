"""Part texts to short_message bytes (SMPP-3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.message_text.segments import GSM7_BASIC, GSM7_EXTENSION, gsm7_septets, segment
from appliance.smpp.deliver import gsm7_text, split_udh
from appliance.smpp.encoding import encode_part, encode_parts

GSM_CHARS = st.sampled_from(sorted(GSM7_BASIC) + sorted(GSM7_EXTENSION))


def test_gsm7_is_one_septet_per_octet_with_escapes() -> None:
    assert gsm7_septets("@A€{") == bytes((0x00, 0x41, 0x1B, 0x65, 0x1B, 0x28))
    assert gsm7_septets("Ç£") == bytes((0x09, 0x01))
    with pytest.raises(ValueError, match="GSM 7-bit"):
        gsm7_septets("ğ")


@given(st.text(GSM_CHARS, max_size=300))
def test_gsm7_round_trips(text: str) -> None:
    assert gsm7_text(gsm7_septets(text)) == text


def test_single_parts_carry_no_udh() -> None:
    [gsm] = encode_parts(["hi"], "GSM-7", 9)
    assert (gsm.data_coding, gsm.esm_class, gsm.short_message) == (0, 0, b"hi")
    [ucs] = encode_parts(["şu"], "UCS-2", 9)
    assert (ucs.data_coding, ucs.esm_class, ucs.short_message) == (8, 0, "şu".encode("utf-16-be"))


def test_concatenated_parts_carry_the_8bit_udh_and_udhi() -> None:
    parts = encode_parts(["ab", "cd", "e"], "GSM-7", 0x2A)
    assert [p.esm_class for p in parts] == [0x40] * 3
    assert [p.short_message[:6] for p in parts] == [bytes((5, 0, 3, 0x2A, 3, i)) for i in (1, 2, 3)]
    assert [split_udh(0x40, p.short_message) for p in parts] == [
        (b"ab", (0x2A, 3, 1)), (b"cd", (0x2A, 3, 2)), (b"e", (0x2A, 3, 3))]


def test_a_part_sent_alone_keeps_its_place_in_the_message() -> None:
    alone = encode_part("cd", "GSM-7", 2, 3, 0x2A)
    assert alone == encode_parts(["ab", "cd", "e"], "GSM-7", 0x2A)[1]


@given(st.text(max_size=500).filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t)))
def test_every_part_of_the_shared_segmentation_fits_a_short_message(text: str) -> None:
    seg = segment(text)
    limit = 160 if seg.encoding == "GSM-7" else 140  # GSM-7 unpacked: a septet per octet
    for part in encode_parts(seg.parts, seg.encoding, 1):
        assert len(part.short_message) <= limit
