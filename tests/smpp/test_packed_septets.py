"""``septets = "packed"``: GSM-7 segments packed after their UDH, septet-aligned.

The expected octets are built here bit by bit (a list of bits, least significant
first, as TS 23.038 §6.1.2.1.1 draws them), not with the appliance's packer, and the
septets read back are decoded with ``gsmcodecs`` (3GPP TS 23.038's tables, a library we
did not write); one example is worked by hand from the spec.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import gsmcodecs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from appliance.config import ConfigError
from appliance.message_text.alphabets import TURKISH_BOTH, TURKISH_LOCKING, TURKISH_SINGLE, Tables
from appliance.message_text.segments import segment
from appliance.smpp.encoding import (
    CR,
    ESM_CLASS_UDHI,
    encode_part,
    encode_parts,
    fill_bits,
    gsm7_septets,
    packed_septets,
)
from appliance.smpp.settings import SmppSettings
from tests.harness import run_cli

assert gsmcodecs  # registers the gsm23.038 codecs
CODEC = {(False, False): "gsm23.038_0_0", (True, False): "gsm23.038_0_1",
         (False, True): "gsm23.038_1_0", (True, True): "gsm23.038_1_1"}
GOOD = {"kind": "smpp", "host": "127.0.0.1", "port": 2775, "system_id": "appliance",
        "password": "secret", "source_addr": "ACME"}


def bits_packed(udh: bytes, septets: bytes) -> bytes:
    """The user data as the air interface carries it, built bit by bit: the UDH octets,
    zero fill bits up to the next septet boundary, then seven bits a septet."""
    bits = [(octet >> i) & 1 for octet in udh for i in range(8)]
    while len(bits) % 7:
        bits.append(0)
    for s in septets:
        bits += [(s >> i) & 1 for i in range(7)]
    if len(bits) % 8 == 1:  # 7 spare bits: <CR>, not zeros (TS 23.038 §6.1.2.3.1)
        bits += [(CR >> i) & 1 for i in range(7)]
    bits += [0] * (-len(bits) % 8)
    return bytes(sum(bits[at + i] << i for i in range(8)) for at in range(0, len(bits), 8))


def bits_unpacked(user_data: bytes, udh_octets: int, count: int) -> bytes:
    """``count`` septets after the UDH and its fill bits, read bit by bit."""
    bits = [(octet >> i) & 1 for octet in user_data for i in range(8)]
    at = udh_octets * 8 + (-udh_octets * 8) % 7
    return bytes(sum(bits[at + 7 * n + i] << i for i in range(7)) for n in range(count))


def test_the_fill_bits_of_ts_23_040() -> None:
    # (7 - (UDH bits mod 7)) mod 7; no UDH, no fill.
    assert [fill_bits(n) for n in (0, 4, 6, 7, 9, 12)] == [0, 3, 1, 0, 5, 2]


def test_a_one_part_gsm7_text_is_the_textbook_packing() -> None:
    # TS 23.038 §6.1.2.1.1: "hellohello" packs to E8329BFD4697D9EC37; no UDH, no fill.
    part = encode_part("hellohello", "GSM-7", 1, 1, 0x2A, septets="packed")
    assert (part.data_coding, part.esm_class) == (0, 0)
    assert part.short_message.hex().upper() == "E8329BFD4697D9EC37"


def test_a_concatenated_part_worked_by_hand() -> None:
    # UDH 05 00 03 01 02 01 is 48 bits: 1 fill bit. 'h' 1101000, 'i' 1101001 after it:
    # bits 0 | 0001011 | 1001011 -> 11010000 (D0), then 1101001 and 1 spare bit (69).
    part = encode_part("hi", "GSM-7", 1, 2, 0x01, septets="packed")
    assert part.esm_class == ESM_CLASS_UDHI
    assert part.short_message.hex().upper() == "050003010201" + "D069"


@pytest.mark.parametrize(("text", "tables"), [
    ("Sayın müşterimiz, İyi günler", (True, False)),  # single shift: UDH 03 24 01 01
])
def test_a_one_part_turkish_text_packed_after_its_shift_element(
        text: str, tables: tuple[bool, bool]) -> None:
    seg = segment(text, turkish=True)
    assert seg.count == 1 and (seg.tables.single_shift, seg.tables.locking_shift) == tables
    sm = encode_part(seg.parts[0], seg.encoding, 1, 1, 0x2A, seg.tables, "packed").short_message
    udh = bytes.fromhex("03240101")
    septets = codecs.encode(text, CODEC[tables])
    assert sm == udh + bits_packed(udh, septets)[len(udh):]
    assert codecs.decode(bits_unpacked(sm, len(udh), len(septets)), CODEC[tables]) == text


@pytest.mark.parametrize(("tables", "elements"), [
    (TURKISH_SINGLE, "240101"), (TURKISH_LOCKING, "250101"), (TURKISH_BOTH, "240101250101"),
])
def test_concatenated_turkish_parts_carry_the_shift_elements_and_aligned_septets(
        tables: Tables, elements: str) -> None:
    parts = ["Sayın müşterimiz, kışlık ürünlerde %30 indirim! ",
             "Ödeme kapıda. İyi alışverişler, Çiçek Evi € {x}"]
    codec = CODEC[(tables.single_shift, tables.locking_shift)]
    encoded = encode_parts(parts, "GSM-7 Turkish", 0x5C, tables, "packed")
    read = []
    for seq, (text, part) in enumerate(zip(parts, encoded, strict=True), start=1):
        udh = bytes.fromhex(f"{5 + len(elements) // 2:02X}00035C02{seq:02X}{elements}")
        septets = codecs.encode(text, codec)
        assert (part.data_coding, part.esm_class) == (0, ESM_CLASS_UDHI)
        assert part.short_message == udh + bits_packed(udh, septets)[len(udh):]
        read.append(codecs.decode(bits_unpacked(part.short_message, len(udh), len(septets)),
                                  codec))
    assert read == parts


def test_seven_spare_bits_hold_a_carriage_return_and_read_back_without_it() -> None:
    # 7 septets, no UDH: 49 bits in 7 octets, 7 spare (an '@' if left zero).
    sm = encode_part("abcdefg", "GSM-7", 1, 1, 0, septets="packed").short_message
    assert len(sm) == 7 and sm[-1] >> 1 == CR
    assert gsm7_septets(sm, 0, "packed") == codecs.encode("abcdefg", "gsm23.038_0_0")


@settings(max_examples=300, deadline=None)
@given(udh_octets=st.integers(0, 139),
       septets=st.binary(max_size=160).map(lambda b: bytes(x & 0x7F for x in b)))
def test_pack_and_unpack_round_trip_after_every_udh_length(udh_octets: int,
                                                           septets: bytes) -> None:
    fill = fill_bits(udh_octets)
    # A last real <CR> that ends on an octet boundary reads as the pad (SMPP carries no
    # septet count; docs/providers.md says so).
    assume(not (septets.endswith(bytes((CR,))) and (fill + 7 * len(septets)) % 8 == 0))
    packed = packed_septets(septets, udh_octets)
    assert len(packed) == -(-(fill + 7 * len(septets)) // 8)  # no octet more than needed
    assert (udh_octets * 8 + fill) % 7 == 0
    assert gsm7_septets(packed, udh_octets, "packed") == septets
    udh = bytes(udh_octets)
    assert udh + packed == bits_packed(udh, septets)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="abcçğıİşŞĞÇöüÖÜ €{}[]~^|\\@$£0123456789.,!?'", min_size=1,
               max_size=480))
def test_every_counted_part_fits_and_reads_back(text: str) -> None:
    seg = segment(text, turkish=True)
    assume(seg.encoding != "UCS-2")
    assume(not any(p.endswith("\r") for p in seg.parts))
    codec = CODEC[(seg.tables.single_shift, seg.tables.locking_shift)]
    parts = encode_parts(seg.parts, seg.encoding, 7, seg.tables, "packed")
    read = []
    for part in parts:
        sm = part.short_message
        udh_octets = 1 + sm[0] if part.esm_class & ESM_CLASS_UDHI else 0
        assert len(sm) <= 140
        read.append(codecs.decode(gsm7_septets(sm[udh_octets:], udh_octets, "packed"), codec))
    assert "".join(read) == text


def test_the_layout_is_a_provider_option_unpacked_by_default() -> None:
    assert SmppSettings.from_table("smsc", GOOD).septets == "unpacked"
    assert SmppSettings.from_table("smsc", {**GOOD, "septets": "packed"}).septets == "packed"
    with pytest.raises(ConfigError) as err:
        SmppSettings.from_table("smsc", {**GOOD, "septets": "octets"})
    assert str(err.value) == ("[providers.smsc] septets: one of unpacked | packed,"
                              " got 'octets'")


def test_config_check_refuses_an_unknown_layout_in_one_line(tmp_path: Path) -> None:
    table = "\n".join(["[providers.smsc]", *(f"{k} = {v!r}" for k, v in GOOD.items())])
    cfg = tmp_path / "appliance.toml"
    cfg.write_text(table.replace("'", '"') + '\nseptets = "octets"\n')
    done = run_cli("config", "check", "--config", str(cfg), "--data-dir", str(tmp_path / "d"),
                   check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "Error: config: [providers.smsc] septets: one of unpacked | packed, got 'octets'"]
    cfg.write_text(table.replace("'", '"') + '\nseptets = "packed"\n')
    shown = run_cli("config", "check", "--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert '"septets": "packed"' in shown.stdout
