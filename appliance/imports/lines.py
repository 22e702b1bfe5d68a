"""From the stored raw payload to one (number, name) pair per line.

Pure functions over bytes and text; no database, no phonenumbers. The worker
decodes a payload once (``decode_payload``), walks it line by line from a
recorded ``(line number, character offset)`` (``iter_lines``) and turns each line
into an :class:`Entry`, a blank line (``None``) or a :class:`ParseError`
(``parse_line``). The accept path only needs ``count_lines``, which counts the
same lines straight from the bytes, fast.

Payload
    UTF-8, with or without a BOM; UTF-16 with a BOM (Excel's "Unicode text")
    is decoded too. Anything else that is not valid UTF-8 is refused with the
    byte offset of the first bad byte, never decoded with replacement characters.

Lines
    End with ``\\r\\n``, ``\\n`` or a lone ``\\r``, and nothing else (no Unicode
    line separators). A final line without a line ending counts; a line ending at
    the very end does not add an empty line. Line numbers are 1-based and count
    every physical line, header and blank ones included.

Cells
    A line is one cell, or cells separated by tab, semicolon or comma, with CSV
    quoting (``"+90 532 123 4567","Ayşe, Yılmaz"``) as Python's csv module reads
    it. The separator is chosen per line: the first of tab, ``;``, ``,`` present
    on the line that yields a cell which looks like a phone number (only number
    characters and at least five digits); if none does, the first of them present.

    The number cell is the first cell that looks like a phone number; failing
    that the first cell with a digit in it; failing that the first non-empty cell
    (so a header row or a line of text still reaches the normaliser and gets a
    specific reason). The name is the first other non-empty cell, stripped. So
    ``number,name``, ``name,number`` and ``name;number;city`` all work. Surrounding
    whitespace of every cell is stripped; a line whose cells are all empty
    (``,,`` from a spreadsheet's empty row) is blank.

Refused lines
    Longer than 1,000 characters → "line too long". Control characters (NUL,
    C0/C1 controls other than tab, Unicode line/paragraph separators) →
    "control characters". Formatting characters such as bidi marks are not
    refused here: they are legitimate in names, and the normaliser refuses them
    in a number.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_LINE_LENGTH",
    "Entry",
    "Line",
    "ParseError",
    "PayloadEncodingError",
    "cells_of",
    "count_lines",
    "decode_payload",
    "iter_lines",
    "looks_like_header",
    "parse_line",
    "skip_lines",
]

MAX_LINE_LENGTH: Final = 1000


@dataclass(frozen=True, slots=True)
class Line:
    """One physical line of the payload: 1-based number, text without its ending."""

    number: int
    text: str


@dataclass(frozen=True, slots=True)
class Entry:
    """The cells of one line that matter: the number as written, and a name."""

    number_text: str
    name: str | None


@dataclass(frozen=True, slots=True)
class ParseError:
    """A line that can't be read as cells at all; ``reason`` is for people."""

    reason: str


class PayloadEncodingError(ValueError):
    """The payload is not text we can decode; ``offset`` is the first bad byte."""

    def __init__(self, offset: int, encoding: str = "UTF-8") -> None:
        where = f"bad byte at offset {offset}"
        super().__init__(f"the list is not valid {encoding} text ({where}); save it as UTF-8")
        self.offset = offset
        self.encoding = encoding


# ---------------------------------------------------------------------------
# Payload and lines.

_BOM_UTF8: Final = b"\xef\xbb\xbf"
_BOM_UTF16_LE: Final = b"\xff\xfe"
_BOM_UTF16_BE: Final = b"\xfe\xff"


def _utf16_codec(data: bytes) -> tuple[str, str] | None:
    if data.startswith(_BOM_UTF16_LE):
        return ("utf-16-le", "UTF-16")
    if data.startswith(_BOM_UTF16_BE):
        return ("utf-16-be", "UTF-16")
    return None


def decode_payload(data: bytes) -> str:
    """Decode a stored payload to text, without its BOM.

    Raises PayloadEncodingError (a ValueError) at the first undecodable byte.
    """
    utf16 = _utf16_codec(data)
    if utf16 is not None:
        codec, label = utf16
        start = 2
    else:
        codec, label = "utf-8", "UTF-8"
        start = 3 if data.startswith(_BOM_UTF8) else 0
    try:
        return (data[start:] if start else data).decode(codec)
    except UnicodeDecodeError as exc:
        raise PayloadEncodingError(start + exc.start, label) from None


def count_lines(data: bytes) -> int:
    """How many lines ``iter_lines(decode_payload(data))`` yields, from the bytes.

    Counts line endings with ``bytes.count`` (a CRLF is one ending, a lone CR is
    one), plus one for a final line without an ending. UTF-8 is not validated
    here: that is ``decode_payload``'s job. A UTF-16 payload is decoded first
    (and so can raise PayloadEncodingError).
    """
    if _utf16_codec(data) is not None:
        text = decode_payload(data)
        count = text.count("\n") + text.count("\r") - text.count("\r\n")
        return count + (1 if text and text[-1] not in "\r\n" else 0)
    start = 3 if data.startswith(_BOM_UTF8) else 0
    if len(data) <= start:
        return 0
    unterminated = 1 if data[-1] not in (0x0A, 0x0D) else 0
    if data.find(b"\r", start) < 0:
        return data.count(b"\n", start) + unterminated
    crs = data.count(b"\r", start)
    lfs = data.count(b"\n", start)
    if lfs == 0:
        return crs + unterminated
    return crs + lfs - data.count(b"\r\n", start) + unterminated


_LINE: Final = re.compile(r"([^\r\n]*)(?:\r\n?|\n)?")


def iter_lines(text: str, start_line: int = 0, start_offset: int = 0) -> Iterator[tuple[Line, int]]:
    """Yield each line after ``start_line`` and the offset just after its ending.

    ``(start_line, start_offset)`` is a position this generator yielded before
    (as ``(line.number, offset)``), or ``(0, 0)`` for the start: resuming there
    yields exactly the remaining lines.
    """
    number = start_line
    end = len(text)
    pos = start_offset
    # LF only (what a browser's textarea gives): str.find beats the regex. The first
    # line holding a CR hands the rest to the regex, which knows CRLF and lone CR.
    find = text.find
    while pos < end:
        newline = find("\n", pos)
        stop = end if newline < 0 else newline
        segment = text[pos:stop]
        if "\r" in segment:
            break
        number += 1
        pos = end if newline < 0 else newline + 1
        yield Line(number, segment), pos
    match = _LINE.match
    while pos < end:
        m = match(text, pos)
        assert m is not None  # the pattern matches anywhere, and consumes a char here
        number += 1
        pos = m.end()
        yield Line(number, m.group(1)), pos


def skip_lines(text: str, start_line: int, start_offset: int, count: int) -> tuple[int, int]:
    """The position ``count`` lines after ``(start_line, start_offset)`` (fewer at the
    end of ``text``): the ``(line.number, offset)`` :func:`iter_lines` yields for that
    line, without making the lines. A parser that takes every other chunk steps over
    the chunks between with it.
    """
    end = len(text)
    find = text.find
    line, pos = start_line, start_offset
    while line - start_line < count and pos < end:
        newline = find("\n", pos)
        pos = end if newline < 0 else newline + 1
        line += 1
    if find("\r", start_offset, pos) < 0:
        return line, pos
    line, pos = start_line, start_offset  # a CR on the way: let iter_lines read the endings
    for item, after in iter_lines(text, start_line, start_offset):
        line, pos = item.number, after
        if line - start_line >= count:
            break
    return line, pos


# ---------------------------------------------------------------------------
# One line.

_CONTROL: Final = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# Only the characters the normaliser accepts, and at least five digits.
_PHONE_LIKE: Final = re.compile(r"\+?[ ()./\-]*(?:[0-9][ ()./\-]*){5}[0-9 ()./\-]*")
_DIGIT: Final = re.compile(r"\d")
_DIGIT_RUN5: Final = re.compile(r"\d{5}")
_DELIMITERS: Final = ("\t", ";", ",")
_SPECIAL: Final = re.compile('[\t;,"]')
_MIN_PHONE_DIGITS: Final = 5

LINE_TOO_LONG: Final = ParseError("line too long")
CONTROL_CHARACTERS: Final = ParseError("control characters")
MALFORMED_QUOTING: Final = ParseError("malformed quoting")


def _phone_like(cell: str) -> bool:
    return _PHONE_LIKE.fullmatch(cell) is not None


def _split(text: str, delimiter: str, quoted: bool) -> list[str]:
    if not quoted:
        return [cell.strip() for cell in text.split(delimiter)]
    row = next(csv.reader([text], delimiter=delimiter, skipinitialspace=True), [])
    return [cell.strip() for cell in row]


def _cells(text: str) -> tuple[list[str], int] | ParseError:
    """Stripped cells and the index of the first phone-like one (-1 if none)."""
    quoted = '"' in text
    phone_like = _PHONE_LIKE.fullmatch
    first: tuple[list[str], int] | None = None
    try:
        for delimiter in _DELIMITERS:
            if delimiter not in text:
                continue
            cells = _split(text, delimiter, quoted)
            for i, cell in enumerate(cells):
                if phone_like(cell) is not None:
                    return cells, i
            if first is None:
                first = (cells, -1)
        if first is not None:
            return first
        cells = _split(text, ",", quoted)
    except csv.Error:
        return MALFORMED_QUOTING
    return cells, (0 if cells and _phone_like(cells[0]) else -1)


def parse_line(text: str) -> Entry | ParseError | None:
    """Read one line: an Entry, None for a blank line, or a ParseError. Never raises."""
    if len(text) > MAX_LINE_LENGTH:
        return LINE_TOO_LONG
    if _CONTROL.search(text) is not None:
        return CONTROL_CHARACTERS
    if _SPECIAL.search(text) is None:
        # No separator and no quote: the line is the number cell.
        cell = text.strip()
        return Entry(cell, None) if cell else None
    split = _cells(text)
    if isinstance(split, ParseError):
        return split
    cells, index = split
    if index < 0:
        for i, cell in enumerate(cells):
            if _DIGIT.search(cell) is not None:
                index = i
                break
        else:
            for i, cell in enumerate(cells):
                if cell:
                    index = i
                    break
            else:
                return None
    if len(cells) == 2:
        return Entry(cells[index], cells[1 - index] or None)
    name = None
    for i, cell in enumerate(cells):
        if cell and i != index:
            name = cell
            break
    return Entry(cells[index], name)


def cells_of(text: str) -> list[str]:
    """The cells :func:`parse_line` reads ``text`` as (for showing a preview); [] for a
    line it refuses."""
    if len(text) > MAX_LINE_LENGTH or _CONTROL.search(text) is not None:
        return []
    if _SPECIAL.search(text) is None:
        return [text.strip()] if text.strip() else []
    split = _cells(text)
    return [] if isinstance(split, ParseError) else split[0]


def looks_like_header(text: str) -> bool:
    """Is this (first non-blank) line a header row such as ``phone,name``?

    True when its first non-empty cell contains a letter and no cell of the line
    has five or more digits (so ``Ayşe,0532 123 45 67``, a name-first data row,
    is not taken for a header).
    """
    if len(text) > MAX_LINE_LENGTH or _CONTROL.search(text) is not None:
        return False
    split = _cells(text)
    if isinstance(split, ParseError):
        return False
    cells = split[0]
    first = next((c for c in cells if c), "")
    if not any(ch.isalpha() for ch in first):
        return False
    if _DIGIT_RUN5.search(first) is not None:
        return False
    return all(sum(ch.isdigit() for ch in c) < _MIN_PHONE_DIGITS for c in cells)
