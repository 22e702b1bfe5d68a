"""ENC-1: Turkish at 7-bit cost, checked against tables we did not write (``gsmcodecs``).

``gsmcodecs`` (PyPI, MIT) compiles 3GPP TS 23.038 release 18's tables; codec
``gsm23.038-X-Y`` is locking shift table X with single shift table Y (Turkish is 1).
"""

from __future__ import annotations

import codecs

import gsmcodecs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.message_text.alphabets import (
    DEFAULT_TABLE,
    ESCAPE,
    PLAIN,
    TURKISH_BOTH,
    TURKISH_CHOICES,
    TURKISH_LOCKING,
    TURKISH_SINGLE,
    Tables,
    pack_septets,
    tables_of,
    unpack_septets,
)
from appliance.message_text.segments import (
    Segmentation,
    check_sendable,
    segment,
    segment_as,
    septets_per_part,
)

TURKISH_LETTERS = "çğıİşŞĞÇöüÖÜ"
CODEC = {(False, False): "gsm23.038_0_0", (True, False): "gsm23.038_0_1",
         (False, True): "gsm23.038_1_0", (True, True): "gsm23.038_1_1"}


def their(tables: Tables) -> codecs.CodecInfo:
    assert gsmcodecs  # registered on import
    return codecs.lookup(CODEC[(tables.single_shift, tables.locking_shift)])


# -- the tables, character by character ----------------------------------------------------

@pytest.mark.parametrize("tables", TURKISH_CHOICES, ids=str)
def test_every_septet_reads_as_gsmcodecs_reads_it(tables: Tables) -> None:
    codec = their(tables)
    for code in range(128):
        if code == ESCAPE:
            continue
        assert tables.text(bytes([code])) == codec.decode(bytes([code]))[0], hex(code)
        for_escape = bytes([ESCAPE, code])
        try:
            theirs = codec.decode(for_escape)[0]
        except UnicodeDecodeError:
            theirs = None
        ours = tables.text(for_escape)
        assert (ours if ours != "?" else None) == (theirs if theirs != " " or code != ESCAPE
                                                   else None), hex(code)


@pytest.mark.parametrize("tables", TURKISH_CHOICES, ids=str)
def test_every_character_writes_as_gsmcodecs_writes_it(tables: Tables) -> None:
    codec = their(tables)
    candidates = set(DEFAULT_TABLE) | set("€ıĞğŞşİç{}[]~\\|^\f") | {"₺", "😀", "é", "è"}
    for ch in sorted(candidates - {"\x1b"}):
        try:
            theirs: bytes | None = codec.encode(ch)[0]
        except UnicodeEncodeError:
            theirs = None
        ours = tables.septets(ch) if tables.cost(ch) else None
        assert ours == theirs, repr(ch)


def test_the_turkish_tables_hold_the_turkish_letters() -> None:
    for ch in "çğıİşŞĞ":
        assert TURKISH_SINGLE.cost(ch) == 2 and TURKISH_LOCKING.cost(ch) == 1
        assert PLAIN.cost(ch) == 0
    assert TURKISH_LOCKING.cost("è") == 0 and TURKISH_SINGLE.cost("è") == 1
    assert {t.header_elements for t in TURKISH_CHOICES} == {
        (), ((0x24, 1),), ((0x25, 1),), ((0x24, 1), (0x25, 1))}
    assert tables_of({0x24: 1, 0x25: 1}) == TURKISH_BOTH


def test_part_sizes_count_the_header_and_its_fill_bits() -> None:
    assert (septets_per_part(PLAIN, False), septets_per_part(PLAIN, True)) == (160, 153)
    for one in (TURKISH_SINGLE, TURKISH_LOCKING):
        assert (septets_per_part(one, False), septets_per_part(one, True)) == (155, 149)
    assert (septets_per_part(TURKISH_BOTH, False), septets_per_part(TURKISH_BOTH, True)) == (
        152, 146)


@given(st.binary(max_size=200), st.integers(0, 6))
def test_septets_pack_and_unpack(data: bytes, fill: int) -> None:
    septets = bytes(b & 0x7F for b in data)
    assert unpack_septets(pack_septets(septets, fill), len(septets), fill) == septets


def test_packing_matches_the_textbook_example() -> None:
    # TS 23.038 §6.1.2.1.1: "hellohello" packs to E8329BFD4697D9EC37.
    assert pack_septets(b"hellohello").hex().upper() == "E8329BFD4697D9EC37"


# -- the choice ----------------------------------------------------------------------------

def test_a_turkish_text_goes_in_7_bits_and_says_what_ucs2_would_take() -> None:
    text = ("Merhaba Ayşe, kampanyamız başladı! Tüm ürünlerde %20 indirim."
            " RET yazıp 4609'a gönderin.")
    plain = segment(text)
    assert plain.encoding == "UCS-2" and plain.ucs2_because == "ş"
    seg = segment(text, turkish=True)
    assert seg.encoding == "GSM-7 Turkish" and seg.count == 1 and seg.ucs2_parts == 2
    assert seg.ucs2_because is None


def test_a_character_in_no_table_keeps_ucs2_and_says_which() -> None:
    seg = segment("Fiyat 100₺, şimdi", turkish=True)
    assert (seg.encoding, seg.ucs2_because, seg.ucs2_parts) == ("UCS-2", "₺", seg.count)
    assert segment("Şimdi 😀", turkish=True).ucs2_because == "😀"


def test_plain_gsm7_stays_plain_and_without_turkish_nothing_changes() -> None:
    assert segment("Hello {world}", turkish=True).encoding == "GSM-7"
    assert segment("Hello {world}", turkish=True).tables == PLAIN
    assert segment("çok", turkish=False).encoding == "UCS-2"


def test_many_euro_signs_go_in_the_locking_table() -> None:
    text = "€" * 100  # 200 septets plain (2 parts), 100 in the Turkish locking table
    assert segment(text).count == 2
    seg = segment(text, turkish=True)
    assert (seg.encoding, seg.count, seg.tables) == ("GSM-7 Turkish", 1, TURKISH_LOCKING)


def test_ties_go_to_fewer_elements_then_the_single_shift() -> None:
    assert segment("Ayşe", turkish=True).tables == TURKISH_SINGLE
    # Turkish letters everywhere: the locking table saves a part over the single shift.
    text = "ş" * 100
    assert segment(text, turkish=True).tables == TURKISH_LOCKING
    # è has no place in the locking table: both tables are needed... or the single shift.
    mixed = "è" + "ş" * 100
    assert segment(mixed, turkish=True).tables == TURKISH_SINGLE


def test_segment_as_gives_back_the_accepted_parts() -> None:
    text = "Sayın müşterimiz, " * 12
    accepted = segment(text, turkish=True)
    assert segment_as(text, accepted.encoding) == accepted
    assert segment_as(text, "UCS-2") == segment(text)


# -- boundaries ----------------------------------------------------------------------------

def test_155_and_156_characters_with_the_single_shift() -> None:
    head = "şè" + "a" * 152  # è has no place in the locking table: 2 + 1 + 152 septets
    assert segment(head, turkish=True).count == 1
    assert segment(head, turkish=True).tables == TURKISH_SINGLE
    over = head + "a"
    seg = segment(over, turkish=True)
    assert seg.count == 2 and seg.tables == TURKISH_SINGLE
    assert [len(p) for p in seg.parts] == [148, 7]  # 149 septets: ş (2), è, 146 a


def test_locking_shift_limits() -> None:
    text = "ş" * 155
    assert (segment(text, turkish=True).count, segment(text, turkish=True).tables) == (
        1, TURKISH_LOCKING)
    assert segment(text + "ş", turkish=True).count == 2
    assert segment("ş" * 298, turkish=True).count == 2
    assert segment("ş" * 299, turkish=True).count == 3
    assert segment("ş" * 447, turkish=True).count == 3


@pytest.mark.parametrize("extra", ["€", "{", "ç"])
def test_an_escape_at_every_part_boundary_is_never_split(extra: str) -> None:
    for at in range(140, 160):
        text = "ş" + "a" * (at - 1) + extra + "b" * 200
        seg = segment(text, turkish=True)
        assert "".join(seg.parts) == text
        assert_fits(seg)


def assert_fits(seg: Segmentation) -> None:
    if seg.encoding == "UCS-2":
        limit = 70 if seg.count == 1 else 67
        for part in seg.parts:
            assert len(part.encode("utf-16-be")) // 2 <= limit
        return
    limit = septets_per_part(seg.tables, seg.count > 1)
    for part in seg.parts:
        septets = seg.tables.septets(part)
        assert len(septets) <= limit
        assert seg.tables.text(septets) == part  # a part reads back alone: no split escape


# -- properties ----------------------------------------------------------------------------

ALPHABET = st.sampled_from(sorted(set(DEFAULT_TABLE) - {"\x1b"}) + list("€{}[]~\\|^ıİşŞğĞçÇ₺"))


@settings(max_examples=300)
@given(st.text(ALPHABET, min_size=1, max_size=700))
def test_every_text_round_trips_fits_and_never_costs_more_than_ucs2(text: str) -> None:
    seg = segment(text, turkish=True)
    assert "".join(seg.parts) == text
    assert_fits(seg)
    n = len(text)  # every character of this alphabet is one UTF-16 unit
    assert seg.ucs2_parts == (1 if n <= 70 else -(-n // 67))
    assert seg.count <= seg.ucs2_parts
    if seg.encoding != "UCS-2":
        whole = b"".join(seg.tables.septets(p) for p in seg.parts)
        assert their(seg.tables).decode(whole)[0] == text  # their reading of our septets


@settings(max_examples=200)
@given(st.text(ALPHABET, min_size=1, max_size=400))
def test_the_choice_is_the_fewest_parts_of_all_pairings(text: str) -> None:
    seg = segment(text, turkish=True)
    best = None
    for tables in TURKISH_CHOICES:
        if all(tables.cost(ch) for ch in text):
            n = _greedy(text, tables)
            best = n if best is None else min(best, n)
    if best is not None:
        assert seg.count == min(best, seg.ucs2_parts) or seg.count == best
        assert seg.count <= best


def _greedy(text: str, tables: Tables) -> int:
    costs = [tables.cost(ch) for ch in text]
    if sum(costs) <= septets_per_part(tables, False):
        return 1
    limit, parts, used = septets_per_part(tables, True), 1, 0
    for c in costs:
        if used + c > limit:
            parts, used = parts + 1, 0
        used += c
    return parts


def test_check_sendable_counts_with_the_tables() -> None:
    text = "ş" * 300  # 3 parts in Turkish, 5 in UCS-2
    assert check_sendable(text, 3, turkish=True).count == 3
    with pytest.raises(ValueError, match="5 UCS-2 parts"):
        check_sendable(text, 3)


@settings(max_examples=200)
@given(st.text(ALPHABET, min_size=1, max_size=700))
def test_both_tables_never_beat_the_locking_shift_alone(text: str) -> None:
    """Why the encoder does not try both tables together (they are in the rule)."""
    assert [TURKISH_BOTH.cost(ch) for ch in text] == [TURKISH_LOCKING.cost(ch) for ch in text]
    if all(TURKISH_LOCKING.cost(ch) for ch in text):
        assert _greedy(text, TURKISH_BOTH) >= _greedy(text, TURKISH_LOCKING)
