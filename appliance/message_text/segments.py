"""Encoding and parts of a message body, as the field counts them (MSG-1, ENC-1).

A body is GSM-7 when every character is in the GSM 03.38 default alphabet or its
extension table, otherwise UCS-2. For a destination where the provider sends the
Turkish national language tables (:mod:`.language`), a body outside GSM-7 may still go
in 7 bits as ``"GSM-7 Turkish"``: the pairing of tables (:mod:`.alphabets`) that gives
the fewest parts.

A part is 140 octets of user data. A user-data header (UDH) takes room from it: its
length octet, then each information element, the 8-bit-reference concatenation element
(5 octets) when there are several parts and the Turkish single shift (IEI ``0x24``) and
locking shift (IEI ``0x25``) elements (3 octets each) when used (TS 23.040 §9.2.3.24).
Septets start on a septet boundary after the header (fill bits), so a part holds
``floor((140 - header) * 8 / 7)`` septets:

==================================  ==========  ===============
encoding and tables                  one part    each of several
==================================  ==========  ===============
GSM-7                                160         153
GSM-7 Turkish, one shift table       155         149
GSM-7 Turkish, both shift tables     152         146
UCS-2 (UTF-16 units)                 70          67
==================================  ==========  ===============

A character of a shift table costs two septets, the escape ``0x1B`` then its code, and
the two are never split across parts; a character outside the Basic Multilingual Plane
(an emoji) costs two UTF-16 units, a surrogate pair, never split either. Parts are
filled greedily in order, which gives the fewest parts for a text in a given encoding.

**The choice.** Without Turkish: GSM-7 when the text has a place there, else UCS-2 (as
the field does). With Turkish: among the pairings that can write the text (plain,
single shift, locking shift, both) the one with the fewest parts, a tie going to the
fewer information elements (then the single shift); it is taken when it needs no more
parts than UCS-2 would. (Both tables together never take fewer parts than the locking
shift alone, so :func:`_turkish` does not count them; a property test holds this.)
Plain GSM-7 keeps a text it can write unless the Turkish tables save a part (many
``€``, one septet in the locking table). **Ties with UCS-2 go to GSM-7 Turkish**: the
parts (the bill) are the same, and Turkish handsets read the tables. UCS-2 remains for
a text with a character in neither Turkish table (``₺``, an emoji): ``ucs2_because``
names the first.
``ucs2_parts`` is what UCS-2 would have taken, whatever was chosen.

**Per kind** (:class:`Counting`, declared by each provider kind). A kind uses only the
Turkish tables it can signal, and parts are counted as it counts them: SMPP and the
simulator signal either shift table in the header (:data:`TURKISH_TABLES`); an
aggregator's switch is one table, and its own count may differ from the network's
(Verimor counts ``€`` as two and fills parts by size, so an escape may straddle a part
boundary). A text the kind's tables cannot write goes UCS-2 and ``ucs2_because``
names the first character none of them has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from typing import Literal

from appliance.message_text.alphabets import (
    DEFAULT_EXTENSION,
    DEFAULT_TABLE,
    ESCAPE,
    PLAIN,
    TURKISH_CHOICES,
    TURKISH_LOCKING,
    TURKISH_SINGLE,
    Tables,
)

Encoding = Literal["GSM-7", "GSM-7 Turkish", "UCS-2"]
ENCODINGS: tuple[Encoding, ...] = ("GSM-7", "GSM-7 Turkish", "UCS-2")

OCTETS_PER_PART = 140
CONCATENATION_IE = 5  # IEI 0x00, length 3, reference, total, sequence
SHIFT_IE = 3  # IEI 0x24 or 0x25, length 1, the language

GSM7_SINGLE = 160
GSM7_CONCAT = 153
UCS2_SINGLE = 70
UCS2_CONCAT = 67

GSM7_BASIC: frozenset[str] = frozenset(ch for i, ch in enumerate(DEFAULT_TABLE) if i != ESCAPE)
"""The 127 characters of the default alphabet (one septet each)."""
GSM7_EXTENSION: frozenset[str] = frozenset(DEFAULT_EXTENSION)
"""The 10 characters of the extension table (two septets each)."""


@dataclass(frozen=True)
class Counting:
    """How a provider kind sends a text and counts its parts (ENC-1), from its
    declaration (:attr:`appliance.providers.kind.ProviderKind.counting`).

    ``tables``: the Turkish pairings it can signal (in the order a tie is settled; empty:
    none). ``unwritten``: characters it never sends in them (a switch whose table is
    not published writes only what both tables hold). ``twice``: characters it counts
    as two septets in every table (Verimor: ``€``, which the locking table holds in
    one). ``whole_escapes``: parts never split an escape pair (the network's count, the
    appliance's own segments over SMPP); ``False``: the provider counts by size, its
    part limits times the parts, as its table says.
    """

    tables: tuple[Tables, ...] = ()
    unwritten: frozenset[str] = frozenset()
    twice: frozenset[str] = frozenset()
    whole_escapes: bool = True
    # What the septet costs are worked out from (not part of the comparison).
    costs: tuple[dict[str, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "costs", tuple(
            {ch: (2 if ch in self.twice else cost) for ch, cost in _COST[t].items()
             if ch not in self.unwritten} for t in self.tables))

    @property
    def plain(self) -> Counting:
        """The same count without the national tables (a destination abroad)."""
        return _plain(self)


@cache
def _plain(counting: Counting) -> Counting:
    return Counting(twice=counting.twice, whole_escapes=counting.whole_escapes)


def septets_per_part(tables: Tables, concatenated: bool) -> int:
    """Septets one part holds with ``tables``, counting the header and its fill bits."""
    header = (CONCATENATION_IE if concatenated else 0) + SHIFT_IE * len(tables.header_elements)
    if header:
        header += 1  # the header's length octet
    return (OCTETS_PER_PART - header) * 8 // 7


@dataclass(frozen=True)
class Segmentation:
    """How a text travels: its encoding, its parts, and why it is UCS-2 if it is.

    ``units`` is the whole text's size in the encoding's unit (septets for GSM-7, UTF-16
    code units for UCS-2). ``"".join(parts)`` is the text; the empty text is one empty
    part. ``tables`` are the 7-bit tables (``PLAIN`` for GSM-7 and UCS-2);
    ``ucs2_parts`` the parts the text would take in UCS-2.
    """

    encoding: Encoding
    parts: tuple[str, ...]
    ucs2_because: str | None
    units: int
    ucs2_parts: int = 0
    tables: Tables = PLAIN

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
    return all(ch in GSM7_BASIC or ch in GSM7_EXTENSION for ch in text)


def _is_high(ch: str) -> bool:
    return "\ud800" <= ch <= "\udbff"


def _is_low(ch: str) -> bool:
    return "\udc00" <= ch <= "\udfff"


def _cuts(costs: list[int], limit: int, whole: bool = True) -> list[int]:
    """Where greedy filling of parts of ``limit`` units starts each new part.

    ``whole``: a piece of two units is never split (it starts the next part); otherwise
    the parts are counted by size and a piece belongs to the part its last unit is in.
    """
    if 2 not in costs:  # one unit each: plain arithmetic
        return list(range(limit, len(costs), limit))
    cuts: list[int] = []
    if not whole:
        end = 0
        part = 0
        for i, cost in enumerate(costs):
            end += cost
            if (end - 1) // limit != part:
                cuts.append(i)
                part = (end - 1) // limit
        return cuts
    used = 0
    for i, cost in enumerate(costs):
        if used + cost > limit:
            cuts.append(i)
            used = 0
        used += cost
    return cuts


def _count(costs: list[int], single: int, concat: int, whole: bool = True) -> int:
    """Parts greedy filling takes for pieces of these costs (without building them)."""
    total = sum(costs)
    if total <= single:
        return 1
    if 2 not in costs or not whole:
        return -(-total // concat)
    return len(_cuts(costs, concat)) + 1


def _pieces(pieces: list[str], costs: list[int], single: int, concat: int,
            whole: bool = True) -> tuple[str, ...]:
    if sum(costs) <= single:
        return ("".join(pieces),)
    bounds = [0, *_cuts(costs, concat, whole), len(pieces)]
    return tuple("".join(pieces[a:b]) for a, b in pairwise(bounds))


def _ucs2_atoms(text: str) -> tuple[list[str], list[int]]:
    """The text as indivisible UTF-16 pieces, and the units of each."""
    pieces: list[str] = []
    costs: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if _is_high(ch) and i + 1 < len(text) and _is_low(text[i + 1]):
            # Two surrogate code points already split in the str: still one pair.
            pieces.append(text[i : i + 2])
            costs.append(2)
            i += 2
            continue
        pieces.append(ch)
        costs.append(2 if ord(ch) > 0xFFFF else 1)
        i += 1
    return pieces, costs


def _ucs2_count(text: str) -> int:
    if max(text, default=" ") < "\ud800":  # no pair to keep whole: plain arithmetic
        n = len(text)
        return 1 if n <= UCS2_SINGLE else -(-n // UCS2_CONCAT)
    return _count(_ucs2_atoms(text)[1], UCS2_SINGLE, UCS2_CONCAT)


# Septets each character costs in each pairing (absent: it has no place there).
_COST: dict[Tables, dict[str, int]] = {
    t: {**{ch: 2 for ch in t.shifted}, **{ch: 1 for ch in t.basic}} for t in TURKISH_CHOICES}

STANDARD = Counting()
"""No national tables; parts as the network counts them (GSM-7 or UCS-2)."""
TURKISH_TABLES = Counting(tables=(TURKISH_SINGLE, TURKISH_LOCKING))
"""Either Turkish shift table, signalled in the user-data header (SMPP, the simulator).
Both together are not offered: they never take fewer parts than the locking shift alone
(see :func:`_turkish`)."""


def _counting(turkish: Counting | bool) -> Counting:
    if isinstance(turkish, Counting):
        return turkish
    return TURKISH_TABLES if turkish else STANDARD


def _gsm7(text: str, tables: Tables, costs: list[int], encoding: Encoding,
          ucs2_parts: int, whole: bool = True) -> Segmentation:
    parts = _pieces(list(text), costs, septets_per_part(tables, False),
                    septets_per_part(tables, True), whole)
    return Segmentation(encoding, parts, None, sum(costs), ucs2_parts, tables)


def _ucs2(text: str, because: str | None) -> Segmentation:
    pieces, costs = _ucs2_atoms(text)
    parts = _pieces(pieces, costs, UCS2_SINGLE, UCS2_CONCAT)
    return Segmentation("UCS-2", parts, because, sum(costs), len(parts))


def _turkish(text: str, counting: Counting) -> Segmentation | None:
    """The best Turkish pairing the kind can signal for a text, or ``None`` when its
    tables cannot write it (UCS-2 is never better: a character costs at most two
    septets there).

    Pairings are tried in the kind's order and a later one is taken only when it needs
    fewer parts. The single shift writes every character any pairing can (the default
    table and all the Turkish letters): a text it cannot write goes UCS-2. Both tables
    together are not among :data:`TURKISH_TABLES`: they write the same characters at the
    same cost as the locking shift alone (whose table already holds every letter the
    single shift adds) with three more header octets, so they never take fewer parts (a
    property test holds this).
    """
    best: tuple[int, Tables, list[int]] | None = None
    whole = counting.whole_escapes
    for tables, table in zip(counting.tables, counting.costs, strict=True):
        costs = [table.get(ch, 0) for ch in text]
        if 0 in costs:
            if tables is TURKISH_SINGLE and not counting.unwritten:
                return None  # it writes every character any Turkish pairing writes
            continue
        n = _count(costs, septets_per_part(tables, False), septets_per_part(tables, True),
                   whole)
        if best is None or n < best[0]:
            best = (n, tables, costs)
    if best is None:
        return None
    ucs2_parts = _ucs2_count(text)
    if best[0] > ucs2_parts:
        return None
    return _gsm7(text, best[1], best[2], "GSM-7 Turkish", ucs2_parts, whole)


def segment(text: str, turkish: Counting | bool = False) -> Segmentation:
    """The encoding and the parts of ``text`` (total: never raises).

    ``turkish``: how the provider sends to this destination (:class:`Counting`: the
    Turkish tables it signals there, and how it counts); ``True`` is
    :data:`TURKISH_TABLES`, ``False`` :data:`STANDARD`. A lone surrogate is counted as
    one UCS-2 unit here; :func:`check_sendable` refuses it.
    """
    counting = _counting(turkish)
    whole = counting.whole_escapes
    plain = _COST[PLAIN]
    costs = [plain.get(ch, 0) for ch in text]
    if 0 not in costs:
        n = len(text)  # every GSM-7 character is one UTF-16 unit
        ucs2_parts = 1 if n <= UCS2_SINGLE else -(-n // UCS2_CONCAT)
        seg = _gsm7(text, PLAIN, costs, "GSM-7", ucs2_parts, whole)
        if counting.tables and "€" in text and seg.count > 1:
            # € is one septet in the Turkish locking table: many of them may save a part.
            better = _turkish(text, counting)
            if better is not None and better.count < seg.count:
                return better
        return seg
    because = text[costs.index(0)]
    if counting.tables:
        chosen = _turkish(text, counting)
        if chosen is not None:
            return chosen
        because = next((ch for ch in text if all(ch not in t for t in counting.costs)),
                       because)
    return _ucs2(text, because)


def sent_as(text: str, encoding: str, turkish: Counting | bool) -> Segmentation | None:
    """The segmentation of a text accepted as ``encoding`` when a provider that sends as
    ``turkish`` says (:func:`segment`'s argument) sends it, or ``None`` when it cannot
    send it in that encoding (``"GSM-7 Turkish"`` where it has no Turkish table that
    writes the text). Failover compares its parts with those the message was accepted
    with."""
    counting = _counting(turkish)
    if encoding == "GSM-7 Turkish":
        return _turkish(text, counting) if counting.tables else None
    if encoding == "UCS-2":
        return _ucs2(text, None)
    plain = _COST[PLAIN]
    costs = [plain.get(ch, 0) for ch in text]
    if 0 in costs:
        return None
    return _gsm7(text, PLAIN, costs, "GSM-7", _ucs2_count(text), counting.whole_escapes)


def segment_as(text: str, encoding: str) -> Segmentation:
    """The segmentation a message accepted as ``encoding`` is sent with.

    The choice is made at acceptance; this gives the same parts again for the encoding
    recorded then (a ``"GSM-7 Turkish"`` message keeps its tables even if the provider's
    configuration changed since).
    """
    return segment(text, turkish=encoding == "GSM-7 Turkish")


def check_sendable(text: str, max_parts: int, turkish: Counting | bool = False
                   ) -> Segmentation:
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
    seg = segment(text, turkish)
    if seg.count > max_parts:
        raise Unsendable(
            "too_many_parts",
            f"the message body needs {seg.count} {seg.encoding} parts, "
            f"more than the limit of {max_parts}",
            limit=max_parts,
            parts=seg.count,
        )
    return seg


def gsm7_septets(text: str, tables: Tables = PLAIN) -> bytes:
    """``text`` as GSM 03.38 septets, one per octet (unpacked; SMPP data_coding 0).

    An escaped character is ``0x1B`` followed by its code. ``ValueError`` for a
    character outside the tables.
    """
    return tables.septets(text)


def gsm7_text(septets: bytes, tables: Tables = PLAIN) -> str:
    """Unpacked GSM 03.38 septets (one per octet) as text: :func:`gsm7_septets` undone."""
    return tables.text(septets)


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
