"""Part texts as ``short_message`` bytes: GSM-7 (with the Turkish tables) or UCS-2, with a UDH.

The text is split by the appliance's one segmentation
(:func:`appliance.message_text.segments.segment`: the same encoding, tables and parts the
API showed and the message row counts); :func:`encode_parts` only turns those part texts
into octets, it never splits.

- GSM-7 and GSM-7 Turkish (``data_coding`` 0, the SMSC default alphabet) are written
  unpacked by default: one septet per octet, an escaped character as ``0x1B`` and its
  code (:meth:`appliance.message_text.alphabets.Tables.septets`). SMPP 3.4 leaves the
  octets of the SMSC default alphabet to the SMSC; one septet per octet is what most
  SMSCs take (node-smpp, Kannel) and what the tests' foreign SMSCs read. The SMSC packs
  them for the air interface, where the part sizes of the segmentation (header and fill
  bits counted) apply.
- With ``septets = "packed"`` (an SMSC that passes ``short_message`` to the air as it
  is) the septets are packed eight to seven octets (TS 23.038 §6.1.2.1.1) after the UDH
  and :func:`fill_bits` zero bits, so the first character starts on a septet boundary
  (TS 23.040 §9.2.3.24): the user data is then exactly the TP-UD of the air interface,
  in the sizes the segmentation counted. SMPP carries no septet count, so when the
  last octet has 7 spare bits they hold ``<CR>`` rather than zeros, which would read
  as a trailing ``@`` (TS 23.038 §6.1.2.3.1); :func:`gsm7_septets` drops it again.
- UCS-2 (``data_coding`` 8) is UTF-16 big-endian (a character outside the BMP takes
  two code units, as handsets expect).
- The user-data header (UDH) holds, in this order, the 8-bit-reference concatenation
  element ``00 03 ref total seq`` when the message has more than one part, then the
  Turkish National Language Single Shift ``24 01 01`` and Locking Shift ``25 01 01``
  elements when the text uses those tables (3GPP TS 23.040 §9.2.3.24.15/16), after its
  length octet; a part with a UDH sets the UDHI bit (``0x40``) of ``esm_class``. A
  one-part Turkish message carries the shift elements alone. ``seq`` is the part's
  number in the whole message, so a part sent again alone (the others already taken)
  still joins them on the handset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from appliance.message_text.alphabets import PLAIN, Tables, pack_septets, unpack_septets
from appliance.message_text.segments import Encoding, ucs2_bytes

Alphabet = Encoding

DATA_CODING_GSM7 = 0
DATA_CODING_UCS2 = 8
ESM_CLASS_UDHI = 0x40
CR = 0x0D  # the pad of 7 spare bits (TS 23.038 §6.1.2.3.1)

SeptetLayout = Literal["unpacked", "packed"]
SEPTET_LAYOUTS: tuple[SeptetLayout, ...] = ("unpacked", "packed")


@dataclass(frozen=True, slots=True)
class EncodedPart:
    data_coding: int
    esm_class: int
    short_message: bytes


def payload(text: str, alphabet: Alphabet, tables: Tables = PLAIN) -> bytes:
    """One part's text as octets (no UDH); ``ValueError`` when it cannot be encoded."""
    return ucs2_bytes(text) if alphabet == "UCS-2" else tables.septets(text)


def fill_bits(udh_octets: int) -> int:
    """Zero bits after a UDH of ``udh_octets`` (its length octet included) that put the
    first septet on a septet boundary (TS 23.040 §9.2.3.24); none without a UDH."""
    return (7 - (udh_octets * 8) % 7) % 7


def packed_septets(septets: bytes, udh_octets: int) -> bytes:
    """``septets`` packed after a UDH of ``udh_octets``, 7 spare bits padded with CR."""
    fill = fill_bits(udh_octets)
    if (fill + 7 * len(septets)) % 8 == 1:  # the last octet would have 7 spare bits
        septets += bytes((CR,))
    return pack_septets(septets, fill)


def gsm7_septets(payload: bytes, udh_octets: int, layout: SeptetLayout) -> bytes:
    """The septets of a ``data_coding`` 0 payload sent after a UDH of ``udh_octets``, one
    an octet (:func:`packed_septets` undone; a last CR filling 7 spare bits dropped)."""
    if layout == "unpacked":
        return payload
    fill = fill_bits(udh_octets)
    count = (len(payload) * 8 - fill) // 7
    septets = unpack_septets(payload, count, fill)
    if septets.endswith(bytes((CR,))) and (fill + 7 * count) == len(payload) * 8:
        septets = septets[:-1]
    return septets


def concatenation_udh(ref: int, total: int, seq: int) -> bytes:
    if not (0 <= ref <= 255 and 1 <= seq <= total <= 255):
        raise ValueError(f"bad concatenation reference {ref} {seq}/{total}")
    return bytes((0x05, 0x00, 0x03, ref, total, seq))


def user_data_header(total: int, seq: int, concat_ref: int, tables: Tables = PLAIN) -> bytes:
    """The whole UDH, its length octet first; empty when the part needs none."""
    elements = b""
    if total > 1:
        elements = concatenation_udh(concat_ref, total, seq)[1:]
    for iei, language in tables.header_elements:
        elements += bytes((iei, 1, language))
    return bytes((len(elements),)) + elements if elements else b""


def encode_part(text: str, alphabet: Alphabet, seq: int, total: int,
                concat_ref: int, tables: Tables = PLAIN,
                septets: SeptetLayout = "unpacked") -> EncodedPart:
    """Part ``seq`` of ``total`` (1-based); a UDH when ``total`` is more than one or
    Turkish tables are in use; GSM-7 septets laid out as ``septets`` says."""
    coding = DATA_CODING_UCS2 if alphabet == "UCS-2" else DATA_CODING_GSM7
    if alphabet == "UCS-2":
        tables = PLAIN
    udh = user_data_header(total, seq, concat_ref, tables)
    data = payload(text, alphabet, tables)
    if coding == DATA_CODING_GSM7 and septets == "packed":
        data = packed_septets(data, len(udh))
    return EncodedPart(coding, ESM_CLASS_UDHI if udh else 0, udh + data)


def encode_parts(parts: Sequence[str], alphabet: Alphabet, concat_ref: int,
                 tables: Tables = PLAIN,
                 septets: SeptetLayout = "unpacked") -> list[EncodedPart]:
    """One :class:`EncodedPart` per part text, in order; a UDH when there are several."""
    if not parts:
        raise ValueError("a message has at least one part")
    return [encode_part(text, alphabet, seq, len(parts), concat_ref, tables, septets)
            for seq, text in enumerate(parts, start=1)]
