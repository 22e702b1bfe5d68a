"""Encoding and parts of a message body, as the field counts them (MSG-1).

A body is GSM-7 when every character is in the GSM 03.38 default alphabet or its
extension table, otherwise UCS-2. Limits per part:

============  ==========  ======================  ====================
encoding      unit        one part (no header)    each concatenated part
============  ==========  ======================  ====================
GSM-7         septet      160                     153
UCS-2         UTF-16 unit 70                      67
============  ==========  ======================  ====================

A concatenated part loses room to its user-data header (6 octets: 7 septets or 3 UTF-16
units). An extension-table character (``{ } [ ] ~ \\ | ^ €`` and form feed) costs two
septets, the escape ``0x1B`` then its code, and the two are never split across parts;
a character outside the Basic Multilingual Plane (an emoji) costs two UTF-16 units, a
surrogate pair, never split either. Parts are filled greedily in order, which gives the
fewest parts for contiguous pieces of a text.

Pure functions, no I/O: the API, the campaign confirmation, the HTTP adapters and the
SMPP transport all count with this one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Encoding = Literal["GSM-7", "UCS-2"]

GSM7_ESCAPE = 0x1B

# GSM 03.38 default alphabet in septet order, 0x00 to 0x7F; 0x1B is the escape to the
# extension table and stands here as a placeholder that never matches a character.
_GSM7_TABLE = (
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
assert len(_GSM7_TABLE) == 128

_GSM7_CODES: dict[str, int] = {ch: i for i, ch in enumerate(_GSM7_TABLE) if i != GSM7_ESCAPE}
# The extension table: reached by the escape septet, then this code.
_GSM7_EXTENSION_CODES: dict[str, int] = {
    "\f": 0x0A,
    "^": 0x14,
    "{": 0x28,
    "}": 0x29,
    "\\": 0x2F,
    "[": 0x3C,
    "~": 0x3D,
    "]": 0x3E,
    "|": 0x40,
    "€": 0x65,
}

GSM7_BASIC: frozenset[str] = frozenset(_GSM7_CODES)
"""The 127 characters of the default alphabet (one septet each)."""
GSM7_EXTENSION: frozenset[str] = frozenset(_GSM7_EXTENSION_CODES)
"""The 10 characters of the extension table (two septets each)."""

GSM7_SINGLE = 160
GSM7_CONCAT = 153
UCS2_SINGLE = 70
UCS2_CONCAT = 67

_LIMITS: dict[Encoding, tuple[int, int]] = {
    "GSM-7": (GSM7_SINGLE, GSM7_CONCAT),
    "UCS-2": (UCS2_SINGLE, UCS2_CONCAT),
}


@dataclass(frozen=True)
class Segmentation:
    """How a text travels: its encoding, its parts, and why it is UCS-2 if it is.

    ``units`` is the whole text's size in the encoding's unit (septets for GSM-7, UTF-16
    code units for UCS-2). ``"".join(parts)`` is the text; the empty text is one empty
    part.
    """

    encoding: Encoding
    parts: tuple[str, ...]
    ucs2_because: str | None
    units: int

    @property
    def count(self) -> int:
        """The number of parts (SMS) the text travels as."""
        return len(self.parts)


class Unsendable(ValueError):
    """A text that cannot go out as SMS.

    ``reason`` is a machine word: ``"empty"``, ``"lone_surrogate"`` or
    ``"too_many_parts"``. ``limit`` is the maximum that was exceeded (parts), ``parts``
    how many the text would need, both ``None`` where they do not apply.
    """

    def __init__(
        self, reason: str, message: str, *, limit: int | None = None, parts: int | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.limit = limit
        self.parts = parts


def is_gsm7(text: str) -> bool:
    """True when every character of ``text`` is in the GSM 7-bit alphabet or extension."""
    return all(ch in _GSM7_CODES or ch in _GSM7_EXTENSION_CODES for ch in text)


def _is_high(ch: str) -> bool:
    return "\ud800" <= ch <= "\udbff"


def _is_low(ch: str) -> bool:
    return "\udc00" <= ch <= "\udfff"


def _atoms(text: str, encoding: Encoding) -> list[tuple[str, int]]:
    """The text as indivisible pieces with their cost in the encoding's unit."""
    out: list[tuple[str, int]] = []
    if encoding == "GSM-7":
        for ch in text:
            out.append((ch, 2 if ch in _GSM7_EXTENSION_CODES else 1))
        return out
    i = 0
    while i < len(text):
        ch = text[i]
        if _is_high(ch) and i + 1 < len(text) and _is_low(text[i + 1]):
            # Two surrogate code points already split in the str: still one pair.
            out.append((text[i : i + 2], 2))
            i += 2
            continue
        out.append((ch, 2 if ord(ch) > 0xFFFF else 1))
        i += 1
    return out


def _pack(atoms: list[tuple[str, int]], limit: int) -> tuple[str, ...]:
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for piece, cost in atoms:
        if used + cost > limit:
            parts.append("".join(current))
            current, used = [], 0
        current.append(piece)
        used += cost
    parts.append("".join(current))
    return tuple(parts)


def segment(text: str) -> Segmentation:
    """The encoding and the parts of ``text`` (total: never raises).

    A lone surrogate is counted as one UCS-2 unit here; :func:`check_sendable` is what
    refuses it.
    """
    because = next(
        (ch for ch in text if ch not in _GSM7_CODES and ch not in _GSM7_EXTENSION_CODES), None
    )
    encoding: Encoding = "GSM-7" if because is None else "UCS-2"
    atoms = _atoms(text, encoding)
    units = sum(cost for _, cost in atoms)
    single, concat = _LIMITS[encoding]
    parts = (text,) if units <= single else _pack(atoms, concat)
    return Segmentation(encoding=encoding, parts=parts, ucs2_because=because, units=units)


def check_sendable(text: str, max_parts: int) -> Segmentation:
    """:func:`segment`, or :class:`Unsendable` for a text no provider can carry.

    Refused: the empty text, a lone surrogate (a str decoded from JSON can hold one; it
    has no UTF-16 form) and a text needing more than ``max_parts`` parts.
    """
    if max_parts < 1:
        raise ValueError(f"max_parts must be at least 1, not {max_parts}")
    if not text:
        raise Unsendable("empty", "the message body is empty")
    for i, ch in enumerate(text):
        if _is_high(ch) or _is_low(ch):
            raise Unsendable(
                "lone_surrogate",
                f"the message body has a lone surrogate U+{ord(ch):04X} at character {i + 1}",
            )
    seg = segment(text)
    if seg.count > max_parts:
        raise Unsendable(
            "too_many_parts",
            f"the message body needs {seg.count} {seg.encoding} parts, "
            f"more than the limit of {max_parts}",
            limit=max_parts,
            parts=seg.count,
        )
    return seg


def gsm7_septets(text: str) -> bytes:
    """``text`` as GSM 03.38 septets, one per octet (unpacked; SMPP data_coding 0).

    An extension character is the escape ``0x1B`` followed by its code. ``ValueError``
    for a character outside the alphabet.
    """
    out = bytearray()
    for i, ch in enumerate(text):
        code = _GSM7_CODES.get(ch)
        if code is not None:
            out.append(code)
            continue
        ext = _GSM7_EXTENSION_CODES.get(ch)
        if ext is None:
            raise ValueError(
                f"U+{ord(ch):04X} at character {i + 1} is not in the GSM 7-bit alphabet"
            )
        out.append(GSM7_ESCAPE)
        out.append(ext)
    return bytes(out)


_GSM7_EXTENSION_CHARS: dict[int, str] = {code: ch for ch, code in _GSM7_EXTENSION_CODES.items()}


def gsm7_text(septets: bytes) -> str:
    """Unpacked GSM 03.38 septets (one per octet) as text: :func:`gsm7_septets` undone.

    A code the tables do not have (an octet above 0x7F, an unknown extension code)
    reads as ``?``; a trailing lone escape is dropped.
    """
    out: list[str] = []
    escaped = False
    for code in septets:
        if escaped:
            out.append(_GSM7_EXTENSION_CHARS.get(code, "?"))
            escaped = False
        elif code == GSM7_ESCAPE:
            escaped = True
        else:
            out.append(_GSM7_TABLE[code] if code < len(_GSM7_TABLE) else "?")
    return "".join(out)


def ucs2_bytes(text: str) -> bytes:
    """``text`` as UTF-16 big-endian (SMPP data_coding 8); an emoji is a surrogate pair.

    :class:`Unsendable` (``"lone_surrogate"``) for a lone surrogate.
    """
    try:
        return text.encode("utf-16-be")
    except UnicodeEncodeError as exc:
        raise Unsendable(
            "lone_surrogate",
            f"the message body has a lone surrogate at character {exc.start + 1}",
        ) from None
