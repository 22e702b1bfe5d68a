"""Parsing a JSON request body strictly, so that what passes can be stored and echoed.

Python's ``json`` accepts things the rest of the appliance cannot use: a lone UTF-16
surrogate (``"\\ud800"`` becomes a ``str`` that fails when SQLite or the response
encodes it), ``NaN`` and ``Infinity``, integers of thousands of digits (which then
fail ``int()``'s digit limit), floats that overflow to infinity, and nesting deep
enough to exhaust the stack. Here each is a clear ``4xx`` (EDGE-3):

* the body must be UTF-8 (no BOM, no surrogates spelled as bytes): ``400 invalid_json``;
* not JSON, ``NaN``/``Infinity``, a number of more than :data:`MAX_NUMBER_CHARS`
  characters or an infinite one, nesting deeper than :data:`MAX_DEPTH`:
  ``400 invalid_json``;
* a lone surrogate in any string, key or value: ``422 invalid_unicode``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from appliance.web.errors import ApiError

MAX_NUMBER_CHARS = 100
MAX_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _invalid(detail: str) -> NoReturn:
    raise ApiError(400, "invalid_json", f"the body is not valid JSON ({detail})")


def _constant(name: str) -> NoReturn:
    _invalid(f"{name} is not a JSON number")


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        _invalid(f"a number of {len(text)} digits; at most {MAX_NUMBER_CHARS} are read")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        _invalid(f"a number of {len(text)} characters; at most {MAX_NUMBER_CHARS} are read")
    value = float(text)
    if not math.isfinite(value):
        _invalid(f"{text} is too large a number")
    return value


def _lone_surrogate(char: str) -> NoReturn:
    raise ApiError(422, "invalid_unicode",
                   f"a string in the body holds a lone UTF-16 surrogate"
                   f" (U+{ord(char):04X}), which is not a character:"
                   f" send valid Unicode", reason="lone_surrogate")


def _check_structure(data: Any, surrogates_possible: bool, big: str | None = None
                     ) -> bytes | None:
    """Depth under :data:`MAX_DEPTH`, and no lone surrogate anywhere (iteratively).

    The string ``big`` (the very object) is checked by encoding it, and the encoding is
    returned: only a lone surrogate fails to encode as UTF-8.
    """
    encoded: bytes | None = None
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if big is not None and value is big and encoded is None:
            try:
                encoded = value.encode("utf-8")
            except UnicodeEncodeError as exc:
                _lone_surrogate(value[exc.start])
            continue
        if isinstance(value, str):
            found = _SURROGATE.search(value) if surrogates_possible else None
            if found is not None:
                _lone_surrogate(found.group())
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            _invalid(f"nested deeper than {MAX_DEPTH} levels")
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        stack.extend((item, depth + 1) for item in items)
    return encoded


def _loads(body: bytes) -> tuple[Any, str]:
    """The parsed body and its text, before the structure and surrogate checks."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        _invalid(f"not UTF-8: bad byte at offset {exc.start}")
    try:
        data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except ApiError:
        raise
    except RecursionError:
        _invalid(f"nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:  # json.JSONDecodeError is one
        _invalid(str(exc))
    return data, text


def parse_json(body: bytes) -> Any:
    """The parsed body, or an :class:`ApiError` saying what is wrong with it."""
    data, text = _loads(body)
    # A lone surrogate can only come from a \\uD8xx..\\uDFxx escape: look for the escape
    # before looking at every string. One pass of the pattern is faster than the two
    # substring searches it replaced (3.7 against 5.6 ms over a 3.6 MB paste).
    possible = _SURROGATE_ESCAPE.search(text) is not None
    _check_structure(data, possible)
    return data


def _an_object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return data


def parse_json_object(body: bytes) -> dict[str, Any]:
    return _an_object(parse_json(body))


def parse_json_object_encoding(body: bytes, field: str) -> tuple[dict[str, Any], bytes | None]:
    """:func:`parse_json_object`, and the string ``field`` as UTF-8 (``None`` if it is not
    a string), for a body that is mostly that one string (a pasted list).

    The same body is refused with the same error as by :func:`parse_json_object`: the
    strings are checked in the same order, but the big one for lone surrogates by its
    encoding, which is needed anyway, and without searching the body for an escape
    first: ~3 ms less for a 3.6 MB paste, ~6 ms less when it holds a character outside
    the BMP (an escaped surrogate pair sends the plain check on to every string).
    """
    data, _ = _loads(body)
    value = data.get(field) if isinstance(data, dict) else None
    if not isinstance(value, str):  # checked in full first, as parse_json_object does
        _check_structure(data, True)
        return _an_object(data), None
    return data, _check_structure(data, True, big=value)
