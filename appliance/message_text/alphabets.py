"""The GSM 7-bit alphabets: the default table, its extension, and the Turkish shift tables.

3GPP TS 23.038 §6.2.1 is the default alphabet (128 septets, ``0x1B`` the escape) and
§6.2.1.1 its extension table (reached by the escape). Annex A gives national language
tables; Turkish has both kinds (national language identifier 1):

- the **single shift** table (A.2.1) replaces the extension table: the escape then a
  code reaches ``Ğ İ Ş ç ğ ı ş`` besides the extension's ``{ } [ ] ~ \\ | ^ €`` and form
  feed. A handset uses it for the whole message when the user-data header carries the
  National Language Single Shift information element (IEI ``0x24``, TS 23.040
  §9.2.3.24.15) with value ``0x01``;
- the **locking shift** table (A.3.1) replaces the default table itself: ``€ ı Ğ ğ Ş ş
  İ ç`` take the places of ``è ì Ø ø Æ æ ¡ ¿`` (which the text then cannot have). It
  applies when the header carries the National Language Locking Shift element (IEI
  ``0x25``, §9.2.3.24.16) with value ``0x01``.

A :class:`Tables` is one pairing of a locking table and a single shift table; the
encoder weighs the four pairings Turkish makes (:data:`PLAIN` .. :data:`TURKISH_BOTH`).
The tables are checked character by character against an implementation this project
did not write (``gsmcodecs``) in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ESCAPE = 0x1B
IEI_SINGLE_SHIFT = 0x24
IEI_LOCKING_SHIFT = 0x25
TURKISH = 0x01  # the national language identifier of Turkish (TS 23.038 §6.2.1.2.4)

# The default alphabet in septet order, 0x00 to 0x7F; 0x1B is the escape and stands here
# as a placeholder that never matches a character.
DEFAULT_TABLE = (
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
assert len(DEFAULT_TABLE) == 128

# Turkish locking shift (A.3.1): the default table with eight places changed.
_TURKISH_LOCKING_CHANGES = {0x04: "€", 0x07: "ı", 0x0B: "Ğ", 0x0C: "ğ", 0x1C: "Ş", 0x1D: "ş",
                            0x40: "İ", 0x60: "ç"}
TURKISH_LOCKING_TABLE = "".join(_TURKISH_LOCKING_CHANGES.get(i, ch)
                                for i, ch in enumerate(DEFAULT_TABLE))

# The default extension table (§6.2.1.1): reached by the escape, then this code.
DEFAULT_EXTENSION: dict[str, int] = {
    "\f": 0x0A, "^": 0x14, "{": 0x28, "}": 0x29, "\\": 0x2F, "[": 0x3C, "~": 0x3D,
    "]": 0x3E, "|": 0x40, "€": 0x65,
}
# Turkish single shift (A.2.1): the extension table and seven Turkish letters.
TURKISH_SINGLE_SHIFT: dict[str, int] = {
    **DEFAULT_EXTENSION,
    "Ğ": 0x47, "İ": 0x49, "Ş": 0x53, "ç": 0x63, "ğ": 0x67, "ı": 0x69, "ş": 0x73,
}


def _codes(table: str) -> dict[str, int]:
    return {ch: i for i, ch in enumerate(table) if i != ESCAPE}


@dataclass(frozen=True)
class Tables:
    """One pairing: a locking (basic) table and a single shift table.

    ``single_shift``/``locking_shift`` say whether each is the Turkish one, which is
    what the user-data header must announce (one information element each).
    """

    single_shift: bool
    locking_shift: bool
    basic: dict[str, int] = field(init=False, repr=False, compare=False)
    shifted: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "basic", _codes(
            TURKISH_LOCKING_TABLE if self.locking_shift else DEFAULT_TABLE))
        object.__setattr__(self, "shifted",
                           TURKISH_SINGLE_SHIFT if self.single_shift else DEFAULT_EXTENSION)

    @property
    def national(self) -> bool:
        """True when a Turkish table is in use (the header must say so)."""
        return self.single_shift or self.locking_shift

    @property
    def header_elements(self) -> tuple[tuple[int, int], ...]:
        """The ``(iei, value)`` information elements these tables need in the header."""
        out: list[tuple[int, int]] = []
        if self.single_shift:
            out.append((IEI_SINGLE_SHIFT, TURKISH))
        if self.locking_shift:
            out.append((IEI_LOCKING_SHIFT, TURKISH))
        return tuple(out)

    def cost(self, ch: str) -> int:
        """Septets ``ch`` takes: 1 in the basic table, 2 escaped, 0 when it has no place."""
        if ch in self.basic:
            return 1
        return 2 if ch in self.shifted else 0

    def septets(self, text: str) -> bytes:
        """``text`` as septets, one per octet (unpacked); a shifted character is the
        escape then its code. ``ValueError`` for a character these tables lack."""
        out = bytearray()
        basic, shifted = self.basic, self.shifted
        for i, ch in enumerate(text):
            code = basic.get(ch)
            if code is not None:
                out.append(code)
                continue
            ext = shifted.get(ch)
            if ext is None:
                which = " (Turkish tables)" if self.national else ""
                raise ValueError(f"U+{ord(ch):04X} at character {i + 1} is not in the"
                                 f" GSM 7-bit alphabet{which}")
            out.append(ESCAPE)
            out.append(ext)
        return bytes(out)

    def text(self, septets: bytes) -> str:
        """Unpacked septets as text: :meth:`septets` undone.

        A code the tables do not have (an octet above 0x7F, an unknown shifted code)
        reads as ``?``; a trailing lone escape is dropped.
        """
        table = TURKISH_LOCKING_TABLE if self.locking_shift else DEFAULT_TABLE
        back = {code: ch for ch, code in self.shifted.items()}
        out: list[str] = []
        escaped = False
        for code in septets:
            if escaped:
                out.append(back.get(code, "?"))
                escaped = False
            elif code == ESCAPE:
                escaped = True
            else:
                out.append(table[code] if code < len(table) else "?")
        return "".join(out)


PLAIN = Tables(single_shift=False, locking_shift=False)
TURKISH_SINGLE = Tables(single_shift=True, locking_shift=False)
TURKISH_LOCKING = Tables(single_shift=False, locking_shift=True)
TURKISH_BOTH = Tables(single_shift=True, locking_shift=True)
TURKISH_CHOICES = (PLAIN, TURKISH_SINGLE, TURKISH_LOCKING, TURKISH_BOTH)
"""The pairings tried for a Turkish destination, in the order a tie is settled: fewer
information elements first, and the single shift before the locking shift (a handset
that ignores the header still reads every character of the default table right)."""


def tables_of(header_elements: dict[int, int]) -> Tables:
    """The tables a received header announces (``{iei: value}``); others read as plain."""
    return Tables(single_shift=header_elements.get(IEI_SINGLE_SHIFT) == TURKISH,
                  locking_shift=header_elements.get(IEI_LOCKING_SHIFT) == TURKISH)


def pack_septets(septets: bytes, fill_bits: int = 0) -> bytes:
    """Septets packed eight to seven octets (TS 23.038 §6.1.2.1.1), after ``fill_bits``
    zero bits (what aligns the text to a septet boundary after a user-data header)."""
    value, bits, out = 0, fill_bits, bytearray()
    for s in septets:
        value |= (s & 0x7F) << bits
        bits += 7
        while bits >= 8:
            out.append(value & 0xFF)
            value >>= 8
            bits -= 8
    if bits:
        out.append(value & 0xFF)
    return bytes(out)


def unpack_septets(octets: bytes, count: int, fill_bits: int = 0) -> bytes:
    """``count`` septets out of packed ``octets`` (:func:`pack_septets` undone)."""
    value = int.from_bytes(octets, "little") >> fill_bits
    return bytes((value >> (7 * i)) & 0x7F for i in range(count))
