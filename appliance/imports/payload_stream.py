"""A stored payload's text, decoded a piece at a time as a parser walks through it.

A parser used to read the whole payload and decode it at once: for a 26 MB list of
Turkish names that is the 26 MB of bytes and, with them, 48 MB of text (a name with
``ş`` makes every character of the text two bytes), held by each parser process for
the job's life. :class:`StreamedText` reads the payload in pieces of
:data:`PIECE_BYTES` through a ``read(offset, size)`` the store gives it (incremental
blob I/O on SQLite, ``substring`` on PostgreSQL), decodes each with an incremental
decoder and keeps only the text from the window being parsed on: about a window of
lines (50,000 by default) and one piece.

Positions stay what they were: a line number and a character offset into the whole
decoded text (``import_jobs.text_offset``). :meth:`StreamedText.lines` hands the
caller the text it holds and the character offset of its first character; the text
holds ``count`` whole lines from the offset asked for (or the rest of the payload),
so a line, its ending included (a CR at the end of a piece waits for the next
character: it may be a CRLF), is parsed exactly as in the whole text. Asked for an
offset before what it holds (a job resumed further back), it starts again from the
payload's first byte.

:func:`check_payload` decodes the whole payload once, keeping nothing, before the
first part of a job is parsed: a payload that is not valid text fails its job before
any of its lines is applied, as when it was decoded whole.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from appliance.imports.lines import PayloadEncodingError, skip_lines

PIECE_BYTES = 1 << 20  # read and decoded at a time

# (offset, size) -> the payload's bytes there (b"" past its end), or None: the payload
# is gone (pruned, or its job deleted).
ReadPiece = Callable[[int, int], bytes | None]

_BOM_UTF8 = b"\xef\xbb\xbf"


class PayloadVanished(LookupError):
    """The payload was there when the job started and is not now."""


def _codec(head: bytes) -> tuple[str, str, int]:
    """(codec, label for errors, bytes of BOM to skip), as ``decode_payload`` picks
    them."""
    if head.startswith(b"\xff\xfe"):
        return "utf-16-le", "UTF-16", 2
    if head.startswith(b"\xfe\xff"):
        return "utf-16-be", "UTF-16", 2
    return "utf-8", "UTF-8", 3 if head.startswith(_BOM_UTF8) else 0


class _Decoder:
    """The payload's text, piece after piece, from its first byte."""

    def __init__(self, read: ReadPiece, size: int, piece: int) -> None:
        self._read, self._size, self._piece = read, size, piece
        head = read(0, 3) if size else b""
        if head is None:
            raise PayloadVanished()
        codec, self._label, self._at = _codec(head)
        self._decoder = codecs.getincrementaldecoder(codec)("strict")
        self.done = size == 0

    def next(self) -> str:
        """The next piece's text ("" at most once a piece can end inside a character)."""
        if self.done:
            return ""
        start = self._at
        data = self._read(start, min(self._piece, self._size - start))
        if data is None:
            raise PayloadVanished()
        self._at += len(data)
        final = not data or self._at >= self._size
        pending = len(self._decoder.getstate()[0])
        try:
            text = self._decoder.decode(data, final)
        except UnicodeDecodeError as exc:
            raise PayloadEncodingError(start - pending + exc.start, self._label) from None
        self.done = final
        return text


def check_payload(read: ReadPiece, size: int, piece: int = PIECE_BYTES) -> None:
    """Decode the whole payload, keeping nothing: raises PayloadEncodingError at its
    first undecodable byte (the offset ``decode_payload`` gives), PayloadVanished if it
    is gone."""
    decoder = _Decoder(read, size, piece)
    while not decoder.done:
        decoder.next()


class StreamedText:
    """A payload's text from a position on, decoded as it is needed."""

    def __init__(self, read: ReadPiece, size: int, piece: int = PIECE_BYTES) -> None:
        self._read, self._size, self._piece = read, size, piece
        self._restart()

    def _restart(self) -> None:
        self._decoder = _Decoder(self._read, self._size, self._piece)
        self.base = 0  # the character offset of self.text[0] in the whole text
        self.text = ""

    def lines(self, offset: int, count: int) -> tuple[str, int]:
        """``(text, base)``: ``text[offset - base:]`` starts at character ``offset`` of
        the whole text and holds ``count`` whole lines (or all that is left)."""
        if offset < self.base:
            self._restart()
        while self.base + len(self.text) < offset and not self._decoder.done:
            self.base += len(self.text)  # before the offset: decoded and dropped
            self.text = self._decoder.next()
        if offset > self.base:
            self.text = self.text[offset - self.base:]
            self.base = offset
        while not self._decoder.done and not self._holds(count):
            self.text += self._decoder.next()
        return self.text, self.base

    def _holds(self, count: int) -> bool:
        """Does ``text`` hold ``count`` whole lines, the last one's ending known to be
        whole (a CR with a character after it)?"""
        text = self.text
        if "\r" not in text:
            return text.count("\n") >= count
        line, pos = skip_lines(text, 0, 0, count)
        return line >= count and pos < len(text)


class WholeText:
    """The same interface over a text already decoded whole (a small job's)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def lines(self, offset: int, count: int) -> tuple[str, int]:
        return self.text, 0
