"""Part texts as ``short_message`` bytes: GSM-7 or UCS-2, with a concatenation UDH.

The text is split by the appliance's one segmentation
(:func:`appliance.message_text.segments.segment`: the same encoding and parts the API showed
and the message row counts); :func:`encode_parts` only turns those part texts into
octets, it never splits.

- GSM-7 (``data_coding`` 0, the SMSC default alphabet) is written unpacked: one septet
  per octet, a character of the extension table as ``0x1B`` and its code
  (:func:`appliance.message_text.segments.gsm7_septets`).
- UCS-2 (``data_coding`` 8) is UTF-16 big-endian (a character outside the BMP takes
  two code units, as handsets expect).
- A message of more than one part carries the 8-bit-reference concatenation UDH
  ``05 00 03 ref total seq`` and sets the UDHI bit (``0x40``) of ``esm_class``. ``seq``
  is the part's number in the whole message, so a part sent again alone (the others
  already taken) still joins them on the handset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from appliance.message_text.segments import Encoding, gsm7_septets, ucs2_bytes

Alphabet = Encoding

DATA_CODING_GSM7 = 0
DATA_CODING_UCS2 = 8
ESM_CLASS_UDHI = 0x40


@dataclass(frozen=True, slots=True)
class EncodedPart:
    data_coding: int
    esm_class: int
    short_message: bytes


def payload(text: str, alphabet: Alphabet) -> bytes:
    """One part's text as octets (no UDH); ``ValueError`` when it cannot be encoded."""
    return gsm7_septets(text) if alphabet == "GSM-7" else ucs2_bytes(text)


def concatenation_udh(ref: int, total: int, seq: int) -> bytes:
    if not (0 <= ref <= 255 and 1 <= seq <= total <= 255):
        raise ValueError(f"bad concatenation reference {ref} {seq}/{total}")
    return bytes((0x05, 0x00, 0x03, ref, total, seq))


def encode_part(text: str, alphabet: Alphabet, seq: int, total: int,
                concat_ref: int) -> EncodedPart:
    """Part ``seq`` of ``total`` (1-based); a UDH when ``total`` is more than one."""
    coding = DATA_CODING_GSM7 if alphabet == "GSM-7" else DATA_CODING_UCS2
    if total == 1:
        return EncodedPart(coding, 0, payload(text, alphabet))
    return EncodedPart(coding, ESM_CLASS_UDHI,
                       concatenation_udh(concat_ref, total, seq) + payload(text, alphabet))


def encode_parts(parts: Sequence[str], alphabet: Alphabet, concat_ref: int) -> list[EncodedPart]:
    """One :class:`EncodedPart` per part text, in order; a UDH when there are several."""
    if not parts:
        raise ValueError("a message has at least one part")
    return [encode_part(text, alphabet, seq, len(parts), concat_ref)
            for seq, text in enumerate(parts, start=1)]
