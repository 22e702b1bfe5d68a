"""MSG-1: encoding and parts, as the field counts them (GSM 03.38, UCS-2 in UTF-16 units)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.message_text.segments import (
    GSM7_BASIC,
    GSM7_EXTENSION,
    Segmentation,
    Unsendable,
    check_sendable,
    gsm7_septets,
    is_gsm7,
    segment,
    ucs2_bytes,
)

TURKISH = "Merhaba Ayşe, kampanyamız başladı..."
EMOJI = "😀"


def gsm_cost(part: str) -> int:
    return sum(2 if ch in GSM7_EXTENSION else 1 for ch in part)


def ucs2_cost(part: str) -> int:
    return len(part.encode("utf-16-be", "surrogatepass")) // 2


def cost(seg: Segmentation, part: str) -> int:
    return gsm_cost(part) if seg.encoding == "GSM-7" else ucs2_cost(part)


# -- tables --------------------------------------------------------------------------


def test_gsm7_alphabet() -> None:
    assert len(GSM7_BASIC) == 127  # 128 code points, the escape excluded
    assert len(GSM7_EXTENSION) == 10
    assert set("{}[]~\\|^€\f") == GSM7_EXTENSION
    assert is_gsm7("Hello @ £5 {ok} [x] ~ | € \\ ^ ÄÖÜäöüñÑÇ")
    for ch in "şğıİŞĞçâ✓😀`":
        assert not is_gsm7(f"abc{ch}"), ch
    assert is_gsm7("")


@pytest.mark.parametrize(
    ("text", "encoding", "sizes", "units"),
    [
        ("a" * 160, "GSM-7", [160], 160),
        ("a" * 161, "GSM-7", [153, 8], 161),
        ("a" * 306, "GSM-7", [153, 153], 306),
        ("a" * 307, "GSM-7", [153, 153, 1], 307),
        ("€" * 80, "GSM-7", [80], 160),  # two septets each: exactly one part
        ("€" * 81, "GSM-7", [76, 5], 162),  # 76 x 2 = 152, a 77th would straddle 153
        ("[" + "a" * 159, "GSM-7", [152, 8], 161),
        ("é" * 160, "GSM-7", [160], 160),  # é is in the GSM 7-bit alphabet
        ("ş" * 70, "UCS-2", [70], 70),
        ("ş" * 71, "UCS-2", [67, 4], 71),
        ("ş" * 134, "UCS-2", [67, 67], 134),
        ("ş" * 135, "UCS-2", [67, 67, 1], 135),
        (EMOJI * 35, "UCS-2", [35], 70),
        (EMOJI * 36, "UCS-2", [33, 3], 72),  # 33 pairs = 66 units; a 34th would split
    ],
)
def test_part_table(text: str, encoding: str, sizes: list[int], units: int) -> None:
    seg = segment(text)
    assert seg.encoding == encoding
    assert [len(p) for p in seg.parts] == sizes
    assert seg.count == len(sizes)
    assert seg.units == units
    assert "".join(seg.parts) == text


def test_escape_pair_at_the_part_boundary_moves_whole_to_the_next_part() -> None:
    text = "a" * 152 + "€" + "b" * 10  # € would take septets 153 and 154
    seg = segment(text)
    assert seg.parts == ("a" * 152, "€" + "b" * 10)
    assert seg.units == 164
    text = "a" * 151 + "[" + "b" * 10  # [ fits exactly as septets 152 and 153
    assert segment(text).parts == ("a" * 151 + "[", "b" * 10)


def test_emoji_at_the_part_boundary_moves_whole_to_the_next_part() -> None:
    text = "ş" * 66 + EMOJI + "ş" * 10  # the pair would take units 67 and 68
    seg = segment(text)
    assert seg.encoding == "UCS-2"
    assert seg.parts == ("ş" * 66, EMOJI + "ş" * 10)
    assert seg.units == 78
    assert ucs2_bytes(seg.parts[1])[:4] == b"\xd8\x3d\xde\x00"


def test_turkish_campaign_text_is_two_ucs2_parts_because_of_s_cedilla() -> None:
    text = (TURKISH + " Detaylar için mağazamıza bekleriz, iyi alışverişler!!!!!")[:100]
    text = text.ljust(100, "!")
    assert len(text) == 100
    seg = segment(text)
    assert seg.encoding == "UCS-2"
    assert seg.ucs2_because == "ş"
    assert seg.count == 2
    assert seg.units == 100
    assert [len(p) for p in seg.parts] == [67, 33]


def test_gsm7_text_has_no_reason_for_ucs2() -> None:
    seg = segment("Your code is 1234. {Thanks}")
    assert seg.encoding == "GSM-7"
    assert seg.ucs2_because is None
    assert seg.units == 29


def test_empty_text_is_one_empty_part() -> None:
    seg = segment("")
    assert (seg.encoding, seg.parts, seg.units, seg.count) == ("GSM-7", ("",), 0, 1)


# -- sendable -------------------------------------------------------------------------


def test_check_sendable_refuses_a_lone_surrogate_from_json() -> None:
    body = json.loads('"Hi \\ud83d there"')
    assert segment(body).encoding == "UCS-2"
    with pytest.raises(Unsendable) as err:
        check_sendable(body, 10)
    assert err.value.reason == "lone_surrogate"
    assert err.value.limit is None
    assert "U+D83D" in str(err.value)
    # A proper pair in JSON escapes decodes to one character and is sendable.
    assert check_sendable(json.loads('"Hi \\ud83d\\ude00"'), 10).units == 5


def test_check_sendable_refuses_more_parts_than_the_limit() -> None:
    assert check_sendable("a" * 459, 3).count == 3
    with pytest.raises(Unsendable) as err:
        check_sendable("a" * 460, 3)
    assert (err.value.reason, err.value.limit, err.value.parts) == ("too_many_parts", 3, 4)
    assert "limit of 3" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_check_sendable_refuses_the_empty_text() -> None:
    with pytest.raises(Unsendable) as err:
        check_sendable("", 10)
    assert err.value.reason == "empty"


# -- wire bytes ------------------------------------------------------------------------


def test_gsm7_septets_known_codes() -> None:
    assert gsm7_septets("@£$") == b"\x00\x01\x02"
    assert gsm7_septets("A a\n") == b"\x41\x20\x61\x0a"
    assert gsm7_septets("Ä§¿à") == b"\x5b\x5f\x60\x7f"
    assert gsm7_septets("€[]{}~\\|^\f") == bytes.fromhex("1b651b3c1b3e1b281b291b3d1b2f1b401b141b0a")
    assert len(gsm7_septets("a" * 150 + "€")) == segment("a" * 150 + "€").units
    with pytest.raises(ValueError, match=r"U\+015F"):
        gsm7_septets("ş")


def test_every_alphabet_character_has_its_own_septet() -> None:
    codes = [gsm7_septets(ch) for ch in GSM7_BASIC]
    assert all(len(c) == 1 and c[0] < 0x80 and c[0] != 0x1B for c in codes)
    assert len(set(codes)) == 127
    ext = [gsm7_septets(ch) for ch in GSM7_EXTENSION]
    assert all(len(c) == 2 and c[0] == 0x1B for c in ext)
    assert len(set(ext)) == 10


def test_ucs2_bytes_are_utf16_big_endian() -> None:
    assert ucs2_bytes("şa") == b"\x01\x5f\x00\x61"
    with pytest.raises(Unsendable) as err:
        ucs2_bytes("a\udc00")
    assert err.value.reason == "lone_surrogate"


# -- properties ------------------------------------------------------------------------

# Texts that mix the alphabet, the extension table, BMP non-GSM and astral characters,
# biased towards lengths around the part limits.
gsm_chars = st.sampled_from(sorted(GSM7_BASIC))
ext_chars = st.sampled_from(sorted(GSM7_EXTENSION))
other_chars = st.sampled_from(list("şğıİçâ✓`é"))
astral_chars = st.sampled_from(["😀", "👍", "🇹", "𝄞"])
any_gsm = st.one_of(gsm_chars, gsm_chars, gsm_chars, ext_chars)
any_char = st.one_of(gsm_chars, ext_chars, other_chars, astral_chars)
gsm_texts = st.lists(any_gsm, max_size=700).map("".join)
mixed_texts = st.one_of(
    st.lists(any_char, max_size=400).map("".join),
    st.text(max_size=300),
    gsm_texts,
)


def min_parts(costs: list[int], single: int, concat: int) -> int:
    """The fewest contiguous parts, by dynamic programming (independent of the greedy)."""
    if sum(costs) <= single:
        return 1
    best = [0] + [10**9] * len(costs)
    for end in range(1, len(costs) + 1):
        used = 0
        start = end
        while start > 0 and used + costs[start - 1] <= concat:
            used += costs[start - 1]
            start -= 1
            best[end] = min(best[end], best[start] + 1)
    return best[len(costs)]


@settings(max_examples=300, deadline=None)
@given(mixed_texts)
def test_parts_rejoin_fit_and_are_minimal(text: str) -> None:
    seg = segment(text)
    assert "".join(seg.parts) == text
    assert seg.count >= 1
    single, concat = (160, 153) if seg.encoding == "GSM-7" else (70, 67)
    assert seg.units == sum(cost(seg, p) for p in seg.parts)
    if seg.count == 1:
        assert seg.units <= single
    else:
        assert seg.units > single
        assert all(0 < cost(seg, p) <= concat for p in seg.parts)
    if seg.encoding == "GSM-7":
        atoms = [gsm_cost(ch) for ch in text]
    else:
        atoms = [ucs2_cost(ch) for ch in text]
    assert seg.count == min_parts(atoms, single, concat)


@settings(max_examples=300, deadline=None)
@given(mixed_texts)
def test_encoding_and_reason(text: str) -> None:
    seg = segment(text)
    if is_gsm7(text):
        assert (seg.encoding, seg.ucs2_because) == ("GSM-7", None)
        assert seg.units == len(gsm7_septets(text))
    else:
        assert seg.encoding == "UCS-2"
        assert seg.ucs2_because is not None
        first = text.index(seg.ucs2_because)
        assert is_gsm7(text[:first]) and not is_gsm7(seg.ucs2_because)
        assert seg.units == ucs2_cost(text)


def boundaries(lengths: list[int]) -> list[int]:
    out, total = [], 0
    for n in lengths[:-1]:
        total += n
        out.append(total)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(other_chars, astral_chars, gsm_chars), min_size=60, max_size=300))
def test_a_surrogate_pair_is_never_split(chars: list[str]) -> None:
    text = "".join(chars)
    seg = segment(text)
    wire = ucs2_bytes(text)
    lengths = [len(ucs2_bytes(p)) for p in seg.parts]
    assert sum(lengths) == len(wire)
    for cut in boundaries(lengths):
        before = int.from_bytes(wire[cut - 2 : cut], "big")
        assert not 0xD800 <= before <= 0xDBFF, "a part ends in the first half of a pair"


@settings(max_examples=300, deadline=None)
@given(gsm_texts)
def test_an_escape_pair_is_never_split(text: str) -> None:
    seg = segment(text)
    assert seg.encoding == "GSM-7"
    wire = gsm7_septets(text)
    lengths = [len(gsm7_septets(p)) for p in seg.parts]
    assert sum(lengths) == len(wire) == seg.units
    for cut in boundaries(lengths):
        assert wire[cut - 1] != 0x1B, "a part ends with the escape of an extension character"


@settings(max_examples=200, deadline=None)
@given(mixed_texts, st.integers(min_value=1, max_value=5))
def test_check_sendable_agrees_with_segment(text: str, max_parts: int) -> None:
    try:
        seg = check_sendable(text, max_parts)
    except Unsendable as exc:
        bad = not text or any(0xD800 <= ord(c) <= 0xDFFF for c in text)
        assert bad or (exc.reason == "too_many_parts" and segment(text).count > max_parts)
    else:
        assert seg == segment(text) and seg.count <= max_parts
        ucs2_bytes(text)
