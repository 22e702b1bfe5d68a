"""Part texts as ``short_message`` bytes: GSM-7 or UCS-2, with a concatenation UDH.

:func:`encode_parts` takes texts that are already split (one per segment) and their
alphabet; it never splits. :func:`split_text` is a plain splitter for callers that
have only the whole text.

- GSM-7 (``data_coding`` 0, the SMSC default alphabet) is written unpacked: one septet
  per octet, a character of the extension table as ``0x1B`` and its code.
- UCS-2 (``data_coding`` 8) is UTF-16 big-endian (a character outside the BMP takes
  two code units, as handsets expect).
- A message of more than one part carries the 8-bit-reference concatenation UDH
  ``05 00 03 ref total seq`` and sets the UDHI bit (``0x40``) of ``esm_class``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Alphabet = Literal["GSM-7", "UCS-2"]

DATA_CODING_GSM7 = 0
DATA_CODING_UCS2 = 8
ESM_CLASS_UDHI = 0x40

GSM7_BASIC = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = {"\f": 0x0A, "^": 0x14, "{": 0x28, "}": 0x29, "\\": 0x2F, "[": 0x3C,
                  "~": 0x3D, "]": 0x3E, "|": 0x40, "€": 0x65}
_BASIC = {ch: code for code, ch in enumerate(GSM7_BASIC) if ch != "\x1b"}
ESCAPE = 0x1B

# Septets or UTF-16 code units per message: alone, and per part when concatenated
# (the 6-octet UDH takes 7 septets or 3 code units).
GSM7_SINGLE, GSM7_PART = 160, 153
UCS2_SINGLE, UCS2_PART = 70, 67


@dataclass(frozen=True, slots=True)
class EncodedPart:
    data_coding: int
    esm_class: int
    short_message: bytes


def gsm7_septets(text: str) -> bytes:
    """``text`` in the GSM 03.38 default alphabet, one septet per octet.

    ``ValueError`` for a character in neither the basic nor the extension table.
    """
    out = bytearray()
    for ch in text:
        code = _BASIC.get(ch)
        if code is not None:
            out.append(code)
            continue
        ext = GSM7_EXTENSION.get(ch)
        if ext is None:
            raise ValueError(f"{ch!r} is not in the GSM-7 alphabet")
        out += bytes((ESCAPE, ext))
    return bytes(out)


def gsm7_length(text: str) -> int | None:
    """Septets ``text`` takes in GSM-7, or ``None`` when it needs UCS-2."""
    n = 0
    for ch in text:
        if ch in _BASIC:
            n += 1
        elif ch in GSM7_EXTENSION:
            n += 2
        else:
            return None
    return n


def ucs2_octets(text: str) -> bytes:
    return text.encode("utf-16-be")


def concatenation_udh(ref: int, total: int, seq: int) -> bytes:
    if not (0 <= ref <= 255 and 1 <= seq <= total <= 255):
        raise ValueError(f"bad concatenation reference {ref} {seq}/{total}")
    return bytes((0x05, 0x00, 0x03, ref, total, seq))


def encode_parts(parts: Sequence[str], alphabet: Alphabet, concat_ref: int) -> list[EncodedPart]:
    """One :class:`EncodedPart` per part text, in order; a UDH when there are several."""
    if not parts:
        raise ValueError("a message has at least one part")
    coding = DATA_CODING_GSM7 if alphabet == "GSM-7" else DATA_CODING_UCS2
    encode = gsm7_septets if alphabet == "GSM-7" else ucs2_octets
    if len(parts) == 1:
        return [EncodedPart(coding, 0, encode(parts[0]))]
    total = len(parts)
    return [EncodedPart(coding, ESM_CLASS_UDHI,
                        concatenation_udh(concat_ref, total, seq) + encode(text))
            for seq, text in enumerate(parts, start=1)]


def split_text(text: str) -> tuple[Alphabet, tuple[str, ...]]:
    """The alphabet ``text`` needs and its part texts.

    GSM-7 when every character is in the default alphabet (160 septets alone, 153 per
    part, an escape pair never split), else UCS-2 (70 code units alone, 67 per part,
    a surrogate pair never split).
    """
    septets = gsm7_length(text)
    if septets is not None:
        if septets <= GSM7_SINGLE:
            return "GSM-7", (text,)
        return "GSM-7", _split(text, GSM7_PART, lambda ch: 2 if ch in GSM7_EXTENSION else 1)
    units = len(text.encode("utf-16-be")) // 2
    if units <= UCS2_SINGLE:
        return "UCS-2", (text,)
    return "UCS-2", _split(text, UCS2_PART, lambda ch: 2 if ord(ch) > 0xFFFF else 1)


def _split(text: str, limit: int, cost: Callable[[str], int]) -> tuple[str, ...]:
    parts: list[str] = []
    start, used = 0, 0
    for i, ch in enumerate(text):
        c = cost(ch)
        if used + c > limit:
            parts.append(text[start:i])
            start, used = i, 0
        used += c
    parts.append(text[start:])
    return tuple(parts)

