"""A list pasted as JSON, decoded while its body streams in (IMP-1).

A JSON paste is one big string, ``text``, beside a few small fields. Parsing it only
after the last byte leaves the whole decode (``\\uXXXX`` escapes everywhere in a
paste of Turkish names), the text's UTF-8 encoding, its line count and its hash to be
done while the client waits. :class:`StreamedJsonPaste` does that work piece by piece
as the body arrives: it finds where the string starts among the object's first
members, then decodes it in segments cut just after a ``\\n`` (a cut
there splits no escape, no surrogate pair and no UTF-8 sequence, so the segments
decode to exactly what the whole string does), encodes each segment and hands it to a
:class:`~appliance.imports.accept.StreamedPayload`, which counts and hashes it as it
would a plain-text body.

What it finds is only a candidate. :meth:`StreamedJsonPaste.finish` gives the decoded
text and the body with the string replaced by ``""`` (``fields``), which the caller
must parse as strictly as any JSON body; and whenever anything is out of the ordinary
(the string not among the first :data:`HEAD_LIMIT` bytes, a bad escape, a lone
surrogate, no closing quote), it gives ``None`` and the body is parsed the ordinary
way, whole. So does a text sent as raw UTF-8 rather than escaped (what JavaScript's
``JSON.stringify`` sends): ``json`` decodes that whole about as fast, and decoding it
piece by piece measured slower through the server. So every body gets the same
answer it would get without this, error for error;
``tests/imports/test_json_paste.py`` compares the two.
"""

from __future__ import annotations

import json
import json.decoder
import sys
from collections.abc import Callable
from dataclasses import dataclass

from appliance.imports.accept import StreamedLineCount, StreamedPayload

HEAD_LIMIT = 64 * 1024  # the object's members before ``text`` must fit in this
RAW_SAMPLE = 4096  # the text's first bytes, to tell escaped text from raw UTF-8
FIELD = "text"
_WS = " \t\n\r"
_PLAIN = json.JSONDecoder()  # only to step over the members before ``text``
# json's own string decoder (C): (decoded, index after the closing quote); strict.
scanstring: Callable[[str, int, bool], tuple[str, int]] = (
    json.decoder.scanstring)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class JsonPaste:
    """A JSON paste decoded as it streamed: the text's UTF-8 pieces and their checks."""

    fields: bytes  # the body with the text replaced by "": parse it strictly
    pieces: tuple[bytes, ...]  # the text, encoded as UTF-8, in the order it came
    text: StreamedPayload  # its lines and sha256 (``result``), as a plain-text body's


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _string_start(head: str) -> int | None:
    """Where the ``text`` string's characters start in ``head`` (after its opening
    quote), or ``None`` while that is not known. Raises ValueError when the body is
    not an object whose ``text`` is a string among its first members."""
    i = _skip(head, 0)
    if head[i:i + 1] != "{":
        raise ValueError("not an object")
    i += 1
    while True:
        i = _skip(head, i)
        if i == len(head):
            return None
        if head[i] != '"':
            raise ValueError("no member named text")  # '}' or not JSON: the full parse says
        key, i = scanstring(head, i + 1, True)
        i = _skip(head, i)
        if head[i:i + 1] != ":":
            return None if i == len(head) else _refuse("no colon")
        i = _skip(head, i + 1)
        if i == len(head):
            return None
        if key == FIELD:
            if head[i] != '"':
                raise ValueError("text is not a string")
            return i + 1
        _, i = _PLAIN.raw_decode(head, i)  # a value cut short raises: read more
        i = _skip(head, i)
        if head[i:i + 1] != ",":
            return None if i == len(head) else _refuse("no comma")
        i += 1


def _refuse(why: str) -> int:
    raise ValueError(why)


def _cut_after_newline(data: bytes, start: int) -> int:
    """The index just after the last ``\\n`` in ``data[start:]`` (0 if there is none).

    Whether that backslash starts the escape ``\\n`` or ends an escaped backslash
    (``\\\\`` then a plain ``n``), what comes before the cut is whole escapes and
    characters: no other escape holds an ``n``.
    """
    found = data.rfind(b"\\n", start)
    return found + 2 if found >= 0 else 0


class StreamedJsonPaste(StreamedLineCount):
    """The JSON row limit while the body streams in (as :class:`StreamedLineCount`),
    and the pasted text decoded on the way (see the module's docstring)."""

    def __init__(self, max_rows: int) -> None:
        super().__init__("application/json", max_rows)
        self.fast = True
        self.state = "head"  # then "string" (in the text), "rest" (after it)
        self.head = b""
        self.pending = b""  # the string's bytes not decoded yet
        self.sampled = False  # whether the text's first bytes said it is escaped
        self.rest: list[bytes] = []
        self.rest_bytes = 0
        self.pieces: list[bytes] = []
        # Its own row limit never refuses: the JSON count above decides that, as before.
        self.text = StreamedPayload("text/plain", sys.maxsize, utf8=True)

    def __call__(self, piece: bytes) -> None:
        if self.fast:
            try:
                self._feed(piece)
            except (ValueError, RecursionError):
                self._give_up()
        super().__call__(piece)

    def _at_most(self, piece: bytes) -> int:
        """A bound of the JSON count without counting backslashes (2 ms for 3.6 MB):
        each ``\\n`` or ``\\r`` escape the count can find in the text is a line feed
        or a carriage return the text's own count found, and outside the text at most
        one a byte."""
        if not self.fast:
            return super()._at_most(piece)
        return max(self.text.counts) + len(self.head) + self.rest_bytes + len(self.pending)

    def _give_up(self) -> None:
        self.fast = False
        self.head = self.pending = b""
        self.rest, self.pieces = [], []
        if self.waiting is not None:  # count what the bound above let through uncounted
            self.at_most = sum(p.count(b"\\") for p in self.waiting)

    def _feed(self, piece: bytes) -> None:
        if self.state == "rest":
            self.rest.append(piece)
            self.rest_bytes += len(piece)
            return
        if self.state == "head":
            self.head += piece
            try:
                head = self.head.decode("utf-8")
                start = _string_start(head)
            except (ValueError, RecursionError):
                start = None  # perhaps cut short: read on, up to the limit
                if len(self.head) > HEAD_LIMIT:
                    raise
            if start is None:
                if len(self.head) > HEAD_LIMIT:
                    raise ValueError("text not among the first members")
                return
            cut = len(head[:start].encode("utf-8"))
            self.head, piece = self.head[:cut], self.head[cut:]
            self.state = "string"
        searched = max(len(self.pending) - 1, 0) if self.sampled else 0
        self.pending += piece  # what came before holds no cut (once sampled)
        if not self.sampled:
            if len(self.pending) < RAW_SAMPLE:
                return  # the same first bytes decide, however the body was cut
            self._sample()
        cut = _cut_after_newline(self.pending, searched)
        if cut:
            segment, self.pending = self.pending[:cut], self.pending[cut:]
            self._decode(segment.decode("utf-8") + '"', final=False)

    def _sample(self) -> None:
        sample = self.pending[:RAW_SAMPLE]
        if b"\\u" not in sample and not sample.isascii():
            # Raw UTF-8 (JavaScript's JSON.stringify): json decodes that whole about
            # as fast, and piece by piece measured 4-11% slower through the server.
            raise ValueError("raw UTF-8: parsed whole")
        self.sampled = True

    def _decode(self, s: str, final: bool) -> None:
        """Decode ``s`` up to the string's closing quote (``s`` ends in one of its own
        unless ``final``); what follows that quote is the rest of the body."""
        text, end = scanstring(s, 0, True)
        if text:
            encoded = text.encode("utf-8")  # a lone surrogate fails here: the full parse says
            self.text(encoded)
            self.pieces.append(encoded)
        if final or end < len(s):  # the string closed
            left = s[end:] if final else s[end:-1]
            self.state = "rest"  # what is pending came after ``s`` (nothing when final)
            self.rest = [left.encode("utf-8")] + ([] if final else [self.pending])
            self.rest_bytes = sum(map(len, self.rest))
            self.pending = b""

    @property
    def undecoded(self) -> int:
        """Bytes :meth:`finish` has still to go through (a thread's work past ~1 MB)."""
        return len(self.pending) + sum(len(part) for part in self.rest)

    def finish(self) -> JsonPaste | None:
        """Once the whole body is in: the paste, or ``None`` for the ordinary parse."""
        if not self.fast or self.state == "head":
            return None
        try:
            if self.state == "string":
                if not self.sampled:
                    self._sample()
                self._decode(self.pending.decode("utf-8"), final=True)
        except ValueError:
            return None
        fields = self.head + b'"' + b"".join(self.rest)
        return JsonPaste(fields, tuple(self.pieces), self.text)


def names_text_once(fields: bytes) -> bool:
    """Whether the object in ``fields`` (already parsed strictly) has one ``text``
    member: with two, JSON's last one wins, and the streamed one was the first."""
    objects: list[list[tuple[str, object]]] = []

    def keep(pairs: list[tuple[str, object]]) -> None:
        objects.append(pairs)  # the outermost object comes last

    json.loads(fields, object_pairs_hook=keep)
    return [name for name, _ in objects[-1]].count(FIELD) == 1
