"""A pasted list's JSON body is refused exactly as any other JSON body (EDGE-3).

``parse_json_object_encoding`` checks the one big string by encoding it instead of
searching for lone surrogates: for every body it must answer what
``parse_json_object`` and then the encoding would, error for error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.web.errors import ApiError
from appliance.web.json_body import parse_json_object, parse_json_object_encoding

pieces = st.sampled_from(["+905321234567", "\n", "Ayşe", "\ud800", "\udfff", "\ud83d\ude00",
                          "\U0001f600", "\\", '"', "é", "\x00", "a"])
strings = st.lists(pieces, max_size=12).map("".join)


def json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, small, whose strings (keys too) are drawn from ``strings``."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(-10**30, 10**30) | strings,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
        max_leaves=8)


values = json_values(strings)


def outcome_of_old(body: bytes) -> tuple[Any, ...]:
    try:
        data = parse_json_object(body)
    except ApiError as exc:
        return ("refused", exc.status, exc.error, exc.message, exc.extra)
    text = data.get("text")
    return ("parsed", data, text.encode("utf-8") if isinstance(text, str) else None)


def outcome_of_new(body: bytes) -> tuple[Any, ...]:
    try:
        data, encoded = parse_json_object_encoding(body, "text")
    except ApiError as exc:
        return ("refused", exc.status, exc.error, exc.message, exc.extra)
    return ("parsed", data, encoded)


@settings(max_examples=500, deadline=None)
@given(text=values, others=st.dictionaries(strings, values, max_size=3),
       ascii_only=st.booleans(), text_first=st.booleans(), in_a_list=st.booleans())
def test_a_paste_body_is_answered_as_the_plain_parse_and_encoding_would(
        text: Any, others: dict[str, Any], ascii_only: bool, text_first: bool,
        in_a_list: bool) -> None:
    fields: Any = {"text": text, **others} if text_first else {**others, "text": text}
    if in_a_list:  # not an object at all: refused, but for the first reason found
        fields = [fields]
    try:
        body = json.dumps(fields, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate cannot be sent as UTF-8 bytes at all
        body = json.dumps(fields, ensure_ascii=True).encode("ascii")
    assert outcome_of_new(body) == outcome_of_old(body)


@pytest.mark.parametrize("body", [
    b'{"list": "x", "text": "12\\ud800"}',
    b'{"list": "\\udc00", "text": "12\\ud800"}',
    b'{"list": "x", "text": ["\\ud800"]}',
    b'{"text": "1", "deep": ' + b"[" * 80 + b"]" * 80 + b"}",
    b'{"text": "\\ud83d\\ude00 \\ud83d"}',
    b"[1, 2]",
    b'["\\ud800"]',
    b'"\\udc00"',
    b"[" * 80 + b"]" * 80,
    b'{"text": "1"',
])
def test_hostile_paste_bodies_get_the_same_answer(body: bytes) -> None:
    assert outcome_of_new(body) == outcome_of_old(body)
    assert outcome_of_new(body)[0] == "refused" or body.startswith(b'{"text": "1", "deep"')
