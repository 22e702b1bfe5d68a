"""The row limit decided while a body streams (EDGE-2) never refuses a list within it.

``StreamedLineCount`` may only refuse when the body certainly has more lines than the
limit: its count must never exceed the lines the import would read, however the body
is shaped (plain text, JSON, url-encoded, multipart) and however it is cut in pieces.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import threading
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.config import ImportSettings
from appliance.imports import accept
from appliance.imports.accept import StreamedLineCount, StreamedPayload, count_payload_lines
from appliance.imports.lines import count_lines

texts = st.lists(st.sampled_from(["\n", "\r", "\r\n", "\\", "\\n", "\\\\", "n", "r", "a", '"',
                                  "%0A", "5", " ", "é"]), max_size=60).map("".join)


def fed(shape: str, body: bytes, cuts: list[int]) -> int:
    counter = StreamedLineCount(shape, 10**9)
    start = 0
    for cut in sorted(c % (len(body) + 1) for c in cuts):
        counter(body[start:cut])
        start = max(start, cut)
    counter(body[start:])
    return counter.lines_at_least


@settings(max_examples=400, deadline=None)
@given(text=texts, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_the_streamed_count_is_a_lower_bound_in_every_body_shape(text: str,
                                                                  cuts: list[int]) -> None:
    lines = count_lines(text.encode())
    bodies = {
        "text/plain": text.encode(),
        "application/json": json.dumps({"list": "x", "text": text}).encode(),
        "application/x-www-form-urlencoded": urllib.parse.urlencode(
            {"list": "x", "text": text}).encode(),
    }
    for shape, body in bodies.items():
        assert fed(shape, body, cuts) <= lines, shape


def test_it_counts_what_is_there_and_refuses_past_the_limit() -> None:
    assert fed("text/plain", b"1\n2\n3\n", [1, 3]) == 3
    assert fed("application/json", json.dumps({"text": "1\n2\n3"}).encode(), [9, 10]) == 2
    counter = StreamedLineCount("text/plain", 2)
    counter(b"1\n2\n")
    try:
        counter(b"3\n")
    except Exception as exc:
        assert getattr(exc, "error", "") == "too_many_rows"
        assert getattr(exc, "extra", {}) == {"limit": 2, "submitted": 3, "at_least": True}
    else:
        raise AssertionError("three lines passed a limit of two")
    utf16 = StreamedLineCount("text/plain", 0)
    utf16("\ufeff1\n2\n".encode("utf-16-le"))  # no line endings counted in UTF-16 bytes


@settings(max_examples=400, deadline=None)
@given(text=texts.filter(lambda t: t.strip()), cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_a_plain_text_body_checked_as_it_streams_counts_and_hashes_it_exactly(
        text: str, cuts: list[int]) -> None:
    """What the accept learns from the pieces (lines, sha256) is what reading the whole
    body again would give, wherever the cuts fall (a CRLF split between two pieces)."""
    body = text.encode()
    checked = StreamedPayload("text/plain", 10**9)
    start = 0
    for cut in sorted(c % (len(body) + 1) for c in cuts):
        if body[start:cut]:
            checked(body[start:cut])
        start = max(start, cut)
    if body[start:]:
        checked(body[start:])
    limits = ImportSettings()
    assert checked.result(limits) == (count_payload_lines(body, limits),
                                      hashlib.sha256(body).hexdigest())


def test_a_large_body_is_hashed_off_the_event_loop_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A body of several hashing batches, in pieces of every size: the digest is the
    whole body's, and the batches were hashed on the hashing thread, not the caller's."""
    rng = random.Random(7)
    line = b"+905321234567,Ay\xc5\x9fe Y\xc4\xb1lmaz\n"
    body = line * (5 * accept.HASH_BATCH // len(line) + 3)
    threads: list[str] = []
    real = accept._update

    def recording(sha: object, batch: list[bytes]) -> None:
        threads.append(threading.current_thread().name)
        real(sha, batch)

    monkeypatch.setattr(accept, "_update", recording)
    checked = StreamedPayload("text/plain", 10**9)
    start = 0
    while start < len(body):
        end = start + rng.choice((1, 7, 4096, 65536, 300_000))
        checked(body[start:end])
        start = end
    asyncio.run(checked.hashed())
    limits = ImportSettings(max_bytes=64 * 1024 * 1024)
    assert checked.result(limits) == (count_payload_lines(body, limits),
                                      hashlib.sha256(body).hexdigest())
    off_loop = [name for name in threads if name.startswith("payload-sha256")]
    assert len(off_loop) >= 4, threads  # five batches' worth, the last bytes hashed here


class CountedAsItCame(StreamedLineCount):
    """Every piece counted as it arrives: what the waiting counter must agree with."""

    defer = False


def refusal(counter: StreamedLineCount, pieces: list[bytes]) -> tuple[int, int] | None:
    """(index of the piece refused, lines it said there were at least), or None."""
    for i, piece in enumerate(pieces):
        try:
            counter(piece)
        except Exception as exc:
            assert getattr(exc, "error", "") == "too_many_rows"
            return i, getattr(exc, "extra", {})["submitted"]
    return None


@settings(max_examples=400, deadline=None)
@given(text=texts, cuts=st.lists(st.integers(0, 10_000), max_size=8),
       limit=st.integers(0, 12))
def test_json_and_form_pieces_counted_late_are_refused_where_they_would_be_counted_at_once(
        text: str, cuts: list[int], limit: int) -> None:
    """JSON and form pieces wait uncounted until they could pass the limit; the body is
    still refused at the same piece, with the same count, as if each were counted at
    once; and what it counted in the end is the same."""
    bodies = {
        "application/json": json.dumps({"list": "x", "text": text}).encode(),
        "application/x-www-form-urlencoded": urllib.parse.urlencode(
            {"list": "x", "text": text}).encode(),
    }
    for shape, body in bodies.items():
        bounds = [0, *sorted(c % (len(body) + 1) for c in cuts), len(body)]
        pieces = [body[a:b] for a, b in itertools.pairwise(bounds) if b > a]
        late, eager = StreamedLineCount(shape, limit), CountedAsItCame(shape, limit)
        assert refusal(late, pieces) == refusal(eager, pieces), shape
        assert late.lines_at_least == eager.lines_at_least, shape


def test_a_json_paste_past_the_limit_is_refused_before_its_end() -> None:
    """The waiting counter still refuses a paste long before its last piece."""
    body = json.dumps({"list": "x", "text": "\n".join(f"+9053{i:08d}" for i in range(5000))})
    pieces = [body.encode()[i:i + 4096] for i in range(0, len(body), 4096)]
    found = refusal(StreamedLineCount("application/json", 1000), pieces)
    assert found is not None and found[0] < len(pieces) // 3 and found[1] > 1000
