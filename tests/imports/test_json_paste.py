"""A JSON paste decoded while it streams in gets the answer the whole-body parse gives.

:class:`StreamedJsonPaste` decodes the pasted ``text`` piece by piece; for every body,
however it is cut into pieces, the accept must come to what parsing the body whole,
encoding its text and counting its lines would: the same fields, the same bytes, the
same line count and hash, or the same refusal, error for error.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from appliance.config import ImportSettings
from appliance.imports.accept import count_payload_lines
from appliance.imports.json_paste import HEAD_LIMIT, RAW_SAMPLE, StreamedJsonPaste
from appliance.refusals import Refused
from appliance.web.api_imports import decoded_json_paste
from appliance.web.errors import ApiError, refusal_status
from appliance.web.json_body import parse_json_object_encoding
from tests.edge.test_json_body import json_values
from tests.edge.test_streamed_line_count import CountedAsItCame, refusal

LIMITS = ImportSettings(max_rows=50, max_bytes=10_000_000)

chars = st.sampled_from(["+905321234567", "\n", "\r", "\r\n", "Ayşe", "\ud800", "\udfff",
                         "\ud83d\ude00", "\U0001f600", "\\", "\\n", "\\\\n", '"', "é",
                         "\x00", "\t", "a", "\ufeff", " ", "/"])
strings = st.lists(chars, max_size=12).map("".join)
values = json_values(strings)


def whole(body: bytes) -> tuple[Any, ...]:
    """What the accept answered before: the body parsed whole, its text counted."""
    try:
        data, text = parse_json_object_encoding(body, "text")
    except ApiError as exc:
        return ("refused", exc.status, exc.error, exc.message)
    if text is None:
        return ("no text",)
    try:
        lines = count_payload_lines(text, LIMITS, utf8=True)
    except Refused as exc:
        return ("refused", refusal_status(exc), exc.error, exc.message, exc.extra)
    others = {k: v for k, v in data.items() if k != "text"}
    return ("parsed", others, text, lines, hashlib.sha256(text).hexdigest())


def streamed(body: bytes, cuts: list[int]) -> tuple[tuple[Any, ...], bool]:
    """The same answer as the accept now comes to it, and whether the streamed path
    gave it (``False``: it fell back to the whole body)."""
    watch = StreamedJsonPaste(max_rows=10**9)
    at = 0
    for size in [*cuts, len(body)]:
        if at < len(body):
            watch(body[at:at + max(size, 1)])
            at += max(size, 1)
    found = decoded_json_paste(watch)
    if found is None:
        return whole(body), False
    data, paste = found
    text = b"".join(paste.pieces)
    others = {k: v for k, v in data.items() if k != "text"}
    try:
        done = paste.text.result(LIMITS)
    except Refused as exc:
        return ("refused", refusal_status(exc), exc.error, exc.message, exc.extra), True
    if done is None:  # the full checks of the joined text, as the accept does
        try:
            lines = count_payload_lines(text, LIMITS, utf8=True)
        except Refused as exc:
            return ("refused", refusal_status(exc), exc.error, exc.message, exc.extra), True
        return ("parsed", others, text, lines, hashlib.sha256(text).hexdigest()), True
    lines, digest = done
    return ("parsed", others, text, lines, digest), True


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(strings, st.lists(strings, max_size=30).map("\n".join), values),
       others=st.dictionaries(strings, values, max_size=3), ascii_only=st.booleans(),
       text_first=st.booleans(), spaced=st.booleans(),
       cuts=st.lists(st.integers(1, 40), max_size=20))
# Escaped (``\u0000``), but a first piece that ends before the escape looks like raw UTF-8.
@example(text="+905321234567é\x00", others={}, ascii_only=False, text_first=True,
         spaced=False, cuts=[24])
def test_a_streamed_paste_gets_the_whole_body_answer(
        text: Any, others: dict[str, Any], ascii_only: bool, text_first: bool,
        spaced: bool, cuts: list[int]) -> None:
    others.pop("text", None)
    fields: dict[str, Any] = {"text": text, **others} if text_first else {**others, "text": text}
    separators = (" , ", " :\n ") if spaced else (",", ":")
    try:
        body = json.dumps(fields, ensure_ascii=ascii_only, separators=separators).encode()
    except UnicodeEncodeError:  # a lone surrogate cannot be sent as UTF-8 bytes at all
        body = json.dumps(fields, ensure_ascii=True, separators=separators).encode()
    answer, fast = streamed(body, cuts)
    assert answer == whole(body)
    # The text's first bytes as sent (and what follows, if it is short) tell escaped text
    # from raw UTF-8, however the body was cut.
    first = text_first and isinstance(text, str)
    sample = body[body.index(b'"', len(b'{"text"')) + 1:][:RAW_SAMPLE] if first else b""
    escaped = ascii_only or (first and (sample.isascii() or b"\\u" in sample))
    if isinstance(text, str) and answer[0] in ("parsed", "refused") and answer[1:3] != (
            422, "invalid_unicode") and escaped:
        # An ordinary escaped paste takes the streamed path: not the whole parse again.
        assert fast or answer[0] == "no text"


@settings(max_examples=400, deadline=None)
@given(text=st.lists(strings, max_size=20).map("\n".join), at=st.integers(0, 10**6),
       byte=st.sampled_from([*b'"\\{}[],: nu0\x00\xc3\xff', None]),
       cuts=st.lists(st.integers(1, 40), max_size=12))
def test_a_broken_paste_gets_the_whole_body_answer(
        text: str, at: int, byte: int | None, cuts: list[int]) -> None:
    """One byte put in or taken out anywhere: refused (or not) as the whole parse says."""
    body = json.dumps({"list": "x", "text": text}, ensure_ascii=False
                      ).encode("utf-8", "surrogatepass")
    at %= len(body)
    body = body[:at] + (bytes([byte]) if byte is not None else b"") + body[at + 1:]
    assert streamed(body, cuts)[0] == whole(body)


@pytest.mark.parametrize("body", [
    b'{"text": "1\\n2\\n", "text": "3"}',  # the last one wins, as in the whole parse
    b'{"text": "1\\n2\\n", "text": ""}',
    b'{"list": "x", "text": "1\\n2\\n"} trailing',
    b'{"list": "x", "text": "1\\n2\\n\\ud800\\n"}',
    b'{"list": "x", "text": "1\\n\\ud83d\\n\\ude00"}',  # halves of a pair on two lines
    b'{"list": "x", "text": "1\\\\n2\\\\\\n3"}',  # escaped backslashes before an n
    b'{"list": "x", "text": "1\\n2\\q"}',
    b'{"list": "x", "text": "1\\n2',
    b'{"list": "x", "text": "1\n2"}',  # a raw line feed inside a string
    b'\xef\xbb\xbf{"text": "1\\n"}',
    b'{"list": "\\ud800", "text": "1\\n"}',
    b'{"list": 1e999, "text": "1\\n"}',
    b'{"list": "x", "n": ' + b"9" * 200 + b', "text": "1\\n"}',
    b'{"list": ' + b"[" * 80 + b"]" * 80 + b', "text": "1\\n"}',
    b'{"list": "x", "text": "1\\n", "deep": ' + b"[" * 80 + b"]" * 80 + b"}",
    b'[{"text": "1\\n"}]',
    b'{"list": "x", "text": ["1"]}',
    b'{"list": "x", "text": ""}',
    b'{"list": "x", "text": "\\n\\n"}',
    b'{"list": "x", "text": "' + b"1\\n" * 60 + b'"}',  # past the row limit
    b'{"list": "x", "text": "1\\n2\\n" , "region" : "tr" }',
])
@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_hostile_paste_bodies_get_the_whole_body_answer(body: bytes, size: int) -> None:
    assert streamed(body, [size] * (len(body) // size + 1))[0] == whole(body)


def test_a_paste_whose_text_comes_after_a_long_head_is_parsed_whole() -> None:
    body = json.dumps({"note": "x" * (HEAD_LIMIT + 10_000), "list": "x", "text": "1\n2\n"}).encode()
    answer, fast = streamed(body, [4096] * 40)
    assert answer == whole(body) and answer[0] == "parsed"
    assert not fast


def test_a_long_paste_is_decoded_on_the_way_in() -> None:
    """Most of the text is decoded before the last piece: only its tail is left."""
    text = "\n".join(f"+9053212{i:05d},Ayşe Öztürk" for i in range(5_000))
    body = json.dumps({"list": "x", "text": text}).encode()
    watch = StreamedJsonPaste(max_rows=10**9)
    for at in range(0, len(body), 65536):
        watch(body[at:at + 65536])
    assert watch.undecoded < 65536
    assert sum(map(len, watch.pieces)) > len(text.encode()) - 65536
    found = decoded_json_paste(watch)
    assert found is not None
    assert b"".join(found[1].pieces) == text.encode()


@settings(max_examples=400, deadline=None)
@given(text=st.lists(chars, max_size=40).map("".join), other=strings,
       cuts=st.lists(st.integers(1, 30), max_size=12), limit=st.integers(0, 12),
       at=st.integers(0, 10**6), byte=st.sampled_from([*b'"\\nr{', None]),
       broken=st.booleans(), text_first=st.booleans())
def test_a_streamed_paste_is_refused_where_every_piece_counted_at_once_would_be(
        text: str, other: str, cuts: list[int], limit: int, at: int, byte: int | None,
        broken: bool, text_first: bool) -> None:
    """Its row limit is bounded by the decoded text's own counts, not by counting
    backslashes: still refused at the same piece with the same count, broken or not."""
    fields = {"text": text, "list": other} if text_first else {"list": other, "text": text}
    body = json.dumps(fields).encode()
    if broken:
        at %= len(body)
        body = body[:at] + (bytes([byte]) if byte is not None else b"") + body[at + 1:]
    pieces, at = [], 0
    for size in [*cuts, len(body)]:
        if at < len(body):
            pieces.append(body[at:at + size])
            at += size
    streamed_paste = StreamedJsonPaste(limit)
    eager = CountedAsItCame("application/json", limit)
    assert refusal(streamed_paste, pieces) == refusal(eager, pieces)
    assert streamed_paste.lines_at_least == eager.lines_at_least


@pytest.mark.parametrize(("pieces", "limit"), [
    # Line feeds after the text, in another field: the bound counts those bytes too.
    ([b'{"text": "1", "list": "', b"\\n" * 30 + b'"}'], 25),
    # Given up on a bad escape: the pieces that waited are counted then.
    ([b'{"list": "x", "text": "' + b"1\\n" * 10, b"\\q" + b"\\n" * 31 + b'"}'], 40),
])
def test_the_row_limit_holds_where_the_streamed_text_stops(pieces: list[bytes],
                                                             limit: int) -> None:
    eager = refusal(CountedAsItCame("application/json", limit), pieces)
    assert eager is not None
    assert refusal(StreamedJsonPaste(limit), pieces) == eager


def test_a_paste_of_raw_utf8_text_is_parsed_whole() -> None:
    text = "\n".join(f"+9053212{i:05d},Ayşe Öztürk" for i in range(40))
    body = json.dumps({"list": "x", "text": text}, ensure_ascii=False).encode()
    answer, fast = streamed(body, [4096] * 10)
    assert answer == whole(body) and answer[0] == "parsed"
    assert not fast
