"""The checks every import submission passes before it is stored (IMP-1, IMP-2).

Shared by the HTTP endpoint and ``appliance import``: size, encoding, line count,
list name, region. Each refusal carries the HTTP status and the JSON fields the
API documents, so the terminal and the API say the same thing.

The row limit is decided twice (EDGE-2). While the body streams in,
:class:`StreamedLineCount` counts the line endings it certainly holds (a lower bound
of its lines) and refuses the body as soon as that passes ``max_rows``:
``413 too_many_rows`` with ``submitted`` as far as it counted and ``"at_least":
true``, and the rest is never read or kept. A body that arrives whole under that
bound is counted exactly (:func:`count_payload_lines`); over the limit it is
``413 too_many_rows`` with the exact ``submitted`` and ``"at_least": false``.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from appliance.config import ImportSettings
from appliance.imports.lines import PayloadEncodingError, count_lines, decode_payload
from appliance.refusals import Invalid, Malformed, TooLarge

MAX_LIST_NAME = 100


def too_large(limit: int) -> TooLarge:
    return TooLarge("payload_too_large",
        f"the list is larger than the limit of {limit} bytes; split it and send it in parts",
        limit=limit,
    )


def check_list_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise Invalid("invalid_list", "give the list name ('list')")
    cleaned = name.strip()
    if len(cleaned) > MAX_LIST_NAME or any(ord(ch) < 32 for ch in cleaned):
        raise Invalid("invalid_list",
                      f"list names are 1 to {MAX_LIST_NAME} printable characters")
    return cleaned


def check_region(region: Any, default: str) -> str:
    if region is None or region == "":
        return default
    from appliance.imports.normalise import valid_region  # phonenumbers: not at the start

    if not isinstance(region, str) or not valid_region(region):
        shown = repr(region if isinstance(region, str) else type(region).__name__)[:40]
        if isinstance(region, str) and len(region) == 2 and region.isascii() \
                and region.isalpha():  # the right shape, but no region anyone numbers
            raise Invalid("invalid_region", f"region {shown} is not a known region: give a"
                          " two-letter country code such as TR, GB, US")
        raise Invalid("invalid_region",
                      f"region {shown} is not a two-letter country code (e.g. TR, GB, US)")
    return region.upper()


def too_many_rows(counted: int, limit: int, at_least: bool) -> TooLarge:
    has = f"at least {counted}" if at_least else f"{counted}"
    return TooLarge("too_many_rows",
        f"This list has {has} lines. The limit is {limit}. Split the list and send it in parts.",
        limit=limit, submitted=counted, at_least=at_least,
    )


# Line endings as each body shape spells them, and what may be counted that is not one.
_JSON_ENDINGS = (b"\\n", b"\\r")  # the escapes \n and \r inside a JSON string
_JSON_FALSE = b"\\\\"  # an escaped backslash: "\\n" is a backslash and an n
_FORM_ENDINGS = ((b"%0A", b"%0a"), (b"%0D", b"%0d"))
MULTIPART_FRAMING_LINES = 100  # line breaks multipart framing itself may add


class StreamedLineCount:
    """A lower bound of a body's lines, kept up to date piece by piece.

    Plain text and CSV count ``\\n`` and ``\\r`` (every line but an unterminated last
    one ends in one of them, a CRLF in both); JSON counts the ``\\n``/``\\r`` escapes
    less escaped backslashes; url-encoded forms count ``%0A``/``%0D``; multipart
    counts raw line feeds less what its framing may add. UTF-16 text (a BOM first) is
    not counted here: its bytes are no line endings. Counting over the previous
    piece's last bytes keeps endings split across pieces.

    JSON and form pieces are counted only once they could hold more lines than the
    limit: every ending counted there starts with a ``\\`` (or a ``%``), and one byte
    is counted far faster than the two-byte escapes among many others (a paste of
    Turkish names is full of ``\\u`` escapes). Until that count passes the limit the
    pieces wait uncounted, so the body is refused at the very piece it would be if
    every piece were counted as it came.
    """

    defer = True  # wait to count JSON and form pieces until they could pass the limit

    def __init__(self, content_type: str, max_rows: int) -> None:
        self.shape = ("json" if content_type == "application/json" else
                      "form" if content_type == "application/x-www-form-urlencoded" else
                      "multipart" if content_type == "multipart/form-data" else "text")
        self.max_rows = max_rows
        self.counts = [0, 0]
        self.false = 0
        self.tail = b""
        self.off = False
        self.started = False
        self.piece_crs = 0  # carriage returns in the last piece (plain text)
        # JSON and form pieces not counted yet, and how many lines they hold at most.
        self.waiting: list[bytes] | None = (
            [] if self.defer and self.shape in ("json", "form") else None)
        self.at_most = 0

    @property
    def lines_at_least(self) -> int:
        self._count_waiting()
        return self._found()

    def _found(self) -> int:
        found = max(self.counts) - self.false
        if self.shape == "multipart":
            found -= MULTIPART_FRAMING_LINES
        return max(found, 0)

    def _count_waiting(self) -> None:
        if self.waiting is not None:
            waiting, self.waiting = self.waiting, None
            for piece in waiting:
                self._count(piece)

    def __call__(self, piece: bytes) -> None:
        if self.off:
            return
        if not self.started:
            self.started = True
            if self.shape == "text" and piece[:2] in (b"\xff\xfe", b"\xfe\xff"):
                self.off = True
                return
        if self.waiting is not None:
            at_most = self._at_most(piece)
            self.waiting.append(piece)
            if at_most <= self.max_rows:
                return
            self._count_waiting()
        else:
            self._count(piece)
        if self._found() > self.max_rows:
            raise too_many_rows(self._found(), self.max_rows, at_least=True)

    def _at_most(self, piece: bytes) -> int:
        """How many lines the pieces so far, ``piece`` included, could hold at most."""
        self.at_most += piece.count(b"\\" if self.shape == "json" else b"%")
        return self.at_most

    def _count(self, piece: bytes) -> None:
        if self.shape in ("text", "multipart"):
            self.counts[0] += piece.count(b"\n")
            # Most lists have no CR at all: `in` finds that with memchr, far faster
            # than counting.
            self.piece_crs = piece.count(b"\r") if b"\r" in piece else 0
            self.counts[1] += self.piece_crs
            return  # single bytes: no ending is split across pieces, nothing to copy
        window = self.tail + piece  # an escape or a %0A may be split across pieces
        tail = self.tail
        if self.shape == "json":
            for i, pattern in enumerate(_JSON_ENDINGS):
                self.counts[i] += window.count(pattern) - tail.count(pattern)
            self.false += window.count(_JSON_FALSE) - tail.count(_JSON_FALSE)
        else:
            for i, patterns in enumerate(_FORM_ENDINGS):
                self.counts[i] += sum(window.count(p) - tail.count(p) for p in patterns)
        if self.shape == "json":
            # Only the trailing run of backslashes matters, and of it only its parity.
            run = len(window) - len(window.rstrip(b"\\"))
            self.tail = b"\\" * (run if run < 2 else 2 + run % 2)
        else:
            self.tail = window[-2:]


# The bytes an empty list may consist of (whitespace, BOMs, NULs).
_EMPTY_BYTES = b" \t\r\n\xef\xbb\xbf\xff\xfe\x00"


HASH_BATCH = 512 * 1024  # a body's bytes hashed on the hashing thread at a time
# One thread, so the batches of a body are hashed in the order they were handed over.
_hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="payload-sha256")


def _update(sha: Any, batch: list[bytes]) -> None:
    for piece in batch:
        sha.update(piece)


class BackgroundSha256:
    """A sha256 of a body as it streams in, hashed on a thread of its own.

    hashlib lets go of the GIL while it hashes, so the event loop goes on reading and
    counting the next pieces on the other core: a 2.8 MB text paste is accepted in
    0.94x the time. Pieces are handed over :data:`HASH_BATCH` at a time; the last
    bytes, fewer than that, are hashed where :meth:`hexdigest` is called (a small body
    never meets the thread). ``threaded=False`` hashes every piece where it comes: a
    JSON paste's decoding holds the GIL nearly all the time, and the thread waiting
    for it measured 1.02-1.03x slower there.
    """

    def __init__(self, threaded: bool = True) -> None:
        self._threaded = threaded
        self._sha = hashlib.sha256()
        self._batch: list[bytes] = []
        self._size = 0
        self._last: Future[None] | None = None  # done: every batch before it is too

    def update(self, piece: bytes) -> None:
        if not self._threaded:
            self._sha.update(piece)
            return
        self._batch.append(piece)
        self._size += len(piece)
        if self._size >= HASH_BATCH:
            batch, self._batch, self._size = self._batch, [], 0
            self._last = _hashing.submit(_update, self._sha, batch)

    async def hashed(self) -> None:
        """Wait, without holding up the event loop, for the batches handed over."""
        if self._last is not None:
            await asyncio.wrap_future(self._last)

    def hexdigest(self) -> str:
        if self._last is not None:
            self._last.result()
        _update(self._sha, self._batch)
        self._batch, self._size = [], 0
        return self._sha.hexdigest()


class StreamedPayload(StreamedLineCount):
    """A plain-text or CSV body checked while it streams in: one pass over each piece.

    Besides the row limit (:class:`StreamedLineCount`), it counts the lines exactly as
    :func:`count_payload_lines` does (line feeds, carriage returns, less the CRLFs, one
    more for an unterminated last line), hashes the bytes, and checks that they are
    UTF-8 (a piece of ASCII after a complete character needs no decoding). So when the
    last byte is in, the accept has nothing left to read again. :meth:`result` is the
    line count and the sha256 hex digest, or ``None`` when the body needs the full
    path (UTF-16, not UTF-8, empty): :func:`count_payload_lines` then says why.
    """

    def __init__(self, content_type: str, max_rows: int, utf8: bool = False) -> None:
        super().__init__(content_type, max_rows)
        self.utf8 = utf8  # the pieces are known to be UTF-8 (encoded here): not checked
        self.sha256 = BackgroundSha256(threaded=not utf8)  # see BackgroundSha256
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.valid = True
        self.crlfs = 0
        self.size = 0
        self.last = b""
        self.content = False

    def __call__(self, piece: bytes) -> None:
        super().__call__(piece)
        if self.off or not self.valid:
            return
        self.sha256.update(piece)
        if self.last == b"\r" and piece[:1] == b"\n":
            self.crlfs += 1
        if self.piece_crs:  # the two-byte search is the slowest count: only where a CR is
            self.crlfs += piece.count(b"\r\n")
        self.size += len(piece)
        self.last = piece[-1:]
        if not self.content and piece.strip(_EMPTY_BYTES):
            self.content = True
        if self.utf8 or (piece.isascii() and not self.decoder.getstate()[0]):
            return
        try:
            self.decoder.decode(piece)
        except UnicodeDecodeError:
            self.valid = False

    async def hashed(self) -> None:
        """Wait for the hashing thread to catch up: :meth:`result` then never blocks."""
        await self.sha256.hashed()

    def result(self, limits: ImportSettings) -> tuple[int, str] | None:
        """(lines, sha256 hex) of the whole body, or ``None``: use the full path."""
        if self.off or not self.valid or not self.started:
            return None
        try:
            self.decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return None
        lfs, crs = self.counts
        total = lfs + crs - self.crlfs + (1 if self.last not in (b"\n", b"\r") else 0)
        if total > limits.max_rows:
            raise too_many_rows(total, limits.max_rows, at_least=False)
        if self.size > limits.max_bytes or not self.content:
            return None
        return total, self.sha256.hexdigest()


def count_payload_lines(payload: bytes, limits: ImportSettings, utf8: bool = False) -> int:
    """Lines in the payload, after the byte, encoding, emptiness and row checks.

    ``utf8``: the bytes are known to be UTF-8 (encoded here from text), not checked again.
    """
    if len(payload) > limits.max_bytes:
        raise too_large(limits.max_bytes)
    try:
        if payload[:2] in (b"\xff\xfe", b"\xfe\xff"):
            decode_payload(payload)  # UTF-16 with a BOM: validate; count_lines reads it too
        elif not utf8:
            payload.decode("utf-8")
        total = count_lines(payload)
    except UnicodeDecodeError as exc:
        raise Malformed("invalid_encoding",
            f"the list is not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8",
        ) from None
    except PayloadEncodingError as exc:
        raise Malformed("invalid_encoding", str(exc)) from None
    if total > limits.max_rows:
        raise too_many_rows(total, limits.max_rows, at_least=False)
    if total == 0 or not payload.strip(b" \t\r\n\xef\xbb\xbf\xff\xfe\x00"):
        raise Invalid("empty_list", "the list is empty: paste at least one number")
    return total
