"""Payload decoding, line walking and counting, and reading one line into cells."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.imports.lines import (
    Entry,
    Line,
    ParseError,
    PayloadEncodingError,
    count_lines,
    decode_payload,
    iter_lines,
    looks_like_header,
    parse_line,
)

# ---------------------------------------------------------------------------
# decode_payload


def test_decode_utf8_with_and_without_bom() -> None:
    text = "telefon,ad\r\n0532 123 45 67,Ayşe Yılmaz\n"
    assert decode_payload(text.encode()) == text
    assert decode_payload(b"\xef\xbb\xbf" + text.encode()) == text
    assert decode_payload(b"") == ""
    assert decode_payload(b"\xef\xbb\xbf") == ""


def test_only_a_leading_bom_is_stripped() -> None:
    assert decode_payload("a\ufeffb".encode()) == "a\ufeffb"


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_decode_utf16_with_bom(codec: str) -> None:
    text = "Numara\tAd\r\n0532 123 45 67\tŞükrü\r\n"
    bom = b"\xff\xfe" if codec == "utf-16-le" else b"\xfe\xff"
    assert decode_payload(bom + text.encode(codec)) == text
    assert decode_payload("\ufeff".encode(codec) + text.encode(codec)) == text


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b"0532\xff123", 4),
        (b"0532 123 45 67\n\xc3", 15),  # truncated sequence at the end
        (b"\xef\xbb\xbfab\x80", 5),  # offsets count the BOM: they are offsets into the payload
        ("Ayşe\n".encode("cp1254"), 2),  # a Turkish Windows export
        (b"\xed\xa0\x80", 0),  # an encoded surrogate is not UTF-8
    ],
)
def test_bad_utf8_is_refused_with_its_offset(data: bytes, offset: int) -> None:
    with pytest.raises(PayloadEncodingError) as err:
        decode_payload(data)
    assert err.value.offset == offset
    assert isinstance(err.value, ValueError)
    assert f"offset {offset}" in str(err.value)


def test_bad_utf16_is_refused() -> None:
    with pytest.raises(PayloadEncodingError) as err:
        decode_payload(b"\xff\xfea\x00b")  # odd length
    assert err.value.encoding == "UTF-16"
    with pytest.raises(PayloadEncodingError):
        decode_payload(b"\xff\xfe\x00\xd8a\x00")  # lone surrogate


# ---------------------------------------------------------------------------
# iter_lines and count_lines


def lines_of(text: str) -> list[str]:
    return [line.text for line, _ in iter_lines(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\r\n", ["a"]),
        ("a\r", ["a"]),
        ("\n", [""]),
        ("\r\n", [""]),
        ("\n\n", ["", ""]),
        ("a\nb", ["a", "b"]),
        ("a\r\nb\r\n", ["a", "b"]),
        ("a\rb\rc", ["a", "b", "c"]),
        ("a\r\rb", ["a", "", "b"]),
        ("a\n\rb", ["a", "", "b"]),
        ("a\r\n\nb", ["a", "", "b"]),
        # Only CR and LF end lines: no Unicode line separators, no form feeds.
        ("a\u2028b\x0bc\x0cd\x85e\u2029f", ["a\u2028b\x0bc\x0cd\x85e\u2029f"]),
    ],
)
def test_line_endings(text: str, expected: list[str]) -> None:
    assert lines_of(text) == expected
    assert count_lines(text.encode()) == len(expected)


def test_line_numbers_and_offsets() -> None:
    text = "phone,name\r\n\r\n0532 123 45 67\n05331234567"
    got = list(iter_lines(text))
    assert got == [
        (Line(1, "phone,name"), 12),
        (Line(2, ""), 14),
        (Line(3, "0532 123 45 67"), 29),
        (Line(4, "05331234567"), 40),
    ]
    assert got[-1][1] == len(text)


def test_resume_from_a_position() -> None:
    text = "a\r\nb\rc\n\nd"
    positions = list(iter_lines(text))
    line, offset = positions[1]
    assert [x for x, _ in iter_lines(text, line.number, offset)] == [
        Line(3, "c"),
        Line(4, ""),
        Line(5, "d"),
    ]
    last_line, end = positions[-1]
    assert list(iter_lines(text, last_line.number, end)) == []


def test_count_lines_with_bom_and_utf16() -> None:
    assert count_lines(b"") == 0
    assert count_lines(b"\xef\xbb\xbf") == 0
    assert count_lines(b"\xef\xbb\xbfa\nb") == 2
    assert count_lines(b"\xef\xbb\xbf\n") == 1
    text = "a\r\nb\rc\n"
    assert count_lines(b"\xff\xfe" + text.encode("utf-16-le")) == 3
    assert count_lines(b"\xfe\xff" + text.encode("utf-16-be")) == 3
    assert count_lines(b"\xff\xfe") == 0


def test_count_lines_is_fast_on_a_large_paste() -> None:
    body = "".join(f"0532 {i:03d} 45 67,Ayşe Yılmaz {i}\r\n" for i in range(100_000))
    data = body.encode()
    assert len(data) > 3_000_000
    best = min(_timed(count_lines, data) for _ in range(3))
    assert count_lines(data) == 100_000
    assert best < 0.05, best  # a few ms in practice; generous for loaded machines


def _timed(fn: object, data: bytes) -> float:
    assert callable(fn)
    started = time.perf_counter()
    fn(data)
    return time.perf_counter() - started


LINE_TEXT = st.lists(
    st.sampled_from(["a", "5", " ", ",", "ş", "\r", "\n", "\r\n", "\t", "\u2028", "😀"]),
    max_size=60,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(LINE_TEXT, st.text(max_size=60)), st.sampled_from(["", "utf-8-sig", "utf-16"]))
def test_count_lines_agrees_with_iter_lines(text: str, encoding: str) -> None:
    try:
        data = text.encode(encoding or "utf-8")
    except UnicodeEncodeError:  # lone surrogates: not representable in a payload
        return
    decoded = decode_payload(data)
    assert decoded == text
    assert count_lines(data) == len(list(iter_lines(decoded)))


@settings(max_examples=300, deadline=None)
@given(LINE_TEXT, st.data())
def test_resuming_anywhere_yields_exactly_the_rest(text: str, data: st.DataObject) -> None:
    everything = list(iter_lines(text))
    assert [line.number for line, _ in everything] == list(range(1, len(everything) + 1))
    # Joining the lines with their endings gives back the text.
    rebuilt = ""
    start = 0
    for line, end in everything:
        assert text[start:end].startswith(line.text)
        assert text[start + len(line.text) : end] in ("", "\n", "\r", "\r\n")
        rebuilt += text[start:end]
        start = end
    assert rebuilt == text
    if everything:
        k = data.draw(st.integers(min_value=0, max_value=len(everything) - 1))
        line, offset = everything[k]
        assert list(iter_lines(text, line.number, offset)) == everything[k + 1 :]


# ---------------------------------------------------------------------------
# parse_line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0532 123 45 67", Entry("0532 123 45 67", None)),
        ("  +90 532 123 4567  ", Entry("+90 532 123 4567", None)),
        ("0532 123 45 67,Ayşe Yılmaz", Entry("0532 123 45 67", "Ayşe Yılmaz")),
        ("0532 123 45 67;Ayşe Yılmaz", Entry("0532 123 45 67", "Ayşe Yılmaz")),
        ("0532 123 45 67\tAyşe Yılmaz", Entry("0532 123 45 67", "Ayşe Yılmaz")),
        ("0532 123 45 67 , Ayşe ", Entry("0532 123 45 67", "Ayşe")),
        ("0532 123 45 67,", Entry("0532 123 45 67", None)),
        ("0532 123 45 67,  ", Entry("0532 123 45 67", None)),
        # CSV quoting, one line at a time.
        ('"+90 532 123 4567","Ayşe, Yılmaz"', Entry("+90 532 123 4567", "Ayşe, Yılmaz")),
        ('"+90 532 123 4567", "Ayşe, Yılmaz"', Entry("+90 532 123 4567", "Ayşe, Yılmaz")),
        ('"05321234567";"Ayşe; Yılmaz"', Entry("05321234567", "Ayşe; Yılmaz")),
        ('"05321234567"', Entry("05321234567", None)),
        ('05321234567,"Ali ""Deli"" Veli"', Entry("05321234567", 'Ali "Deli" Veli')),
        ('"0532 123 45 67', Entry("0532 123 45 67", None)),  # unclosed quote: lenient
        # Name first.
        ("Ayşe Yılmaz,0532 123 45 67", Entry("0532 123 45 67", "Ayşe Yılmaz")),
        ("Ayşe Yılmaz\t+905321234567", Entry("+905321234567", "Ayşe Yılmaz")),
        # The separator is the one that yields a number cell.
        ("Yılmaz, Ayşe;0532 123 45 67", Entry("0532 123 45 67", "Yılmaz, Ayşe")),
        ("0532 123 45 67,Ayşe;Ali", Entry("0532 123 45 67", "Ayşe;Ali")),
        # More cells: first number-like cell, first other non-empty cell.
        ("Ayşe,2,0532 123 45 67,İstanbul", Entry("0532 123 45 67", "Ayşe")),
        (",,0532 123 45 67,,Ayşe", Entry("0532 123 45 67", "Ayşe")),
        ("05321234567,05331234567", Entry("05321234567", "05331234567")),
        # No number-like cell: the first cell with a digit, else the first non-empty
        # one, so that the normaliser gives the reason.
        ("Ayşe,0532 123 45 67 ext 5", Entry("0532 123 45 67 ext 5", "Ayşe")),
        ("0532,123,45,67", Entry("0532", "123")),
        ("phone,name", Entry("phone", "name")),
        ("Ayşe Yılmaz", Entry("Ayşe Yılmaz", None)),
        ('=HYPERLINK("http://x","0532")', Entry("0532)", '=HYPERLINK("http://x"')),
        # Hostile but not a parse error: the normaliser and the report handle them.
        ("０５３２ １２３ ４５ ６７", Entry("０５３２ １２３ ４５ ６７", None)),
        ("\u200f0532 123 45 67,\u200fعلي", Entry("\u200f0532 123 45 67", "\u200fعلي")),
        ("=05321234567,=cmd|' /C calc'!A0", Entry("=05321234567", "=cmd|' /C calc'!A0")),
    ],
)
def test_line_shapes(text: str, expected: Entry) -> None:
    assert parse_line(text) == expected


@pytest.mark.parametrize(
    "text", ["", " ", "\t", "  \t ", ",", ",,", ";;", "\t\t", '"",""', " , ", "\u3000"]
)
def test_blank_lines(text: str) -> None:
    assert parse_line(text) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0" * 1001, "line too long"),
        ("0532 123 45 67," + "a" * 10_000, "line too long"),
        ("0532\x00123", "control characters"),
        ("\x00", "control characters"),
        ("0532 123 45 67,Ay\x07şe", "control characters"),
        ("0532 123 45 67\x1b[31m", "control characters"),
        ("0532 123 45 67\x7f", "control characters"),
        ("0532 123 45 67\x85", "control characters"),
        ("0532 123 45 67\u2028Ayşe", "control characters"),
        ("0532\r123", "control characters"),
        ("0532\n123", "control characters"),
        ("\x0b", "control characters"),
    ],
)
def test_refused_lines(text: str, reason: str) -> None:
    assert parse_line(text) == ParseError(reason)


def test_line_at_the_limit_is_read() -> None:
    text = "0532 123 45 67," + "a" * (1000 - 15)
    assert len(text) == 1000
    assert isinstance(parse_line(text), Entry)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.text(max_size=1100),
        st.text(alphabet='0123456789 +,;\t"aş\u200f\x00', max_size=80),
    )
)
def test_parse_line_never_raises(text: str) -> None:
    result = parse_line(text)
    assert result is None or isinstance(result, Entry | ParseError)
    if isinstance(result, Entry):
        assert result.number_text
        assert result.number_text == result.number_text.strip()
        assert result.name is None or (result.name and result.name == result.name.strip())
    assert isinstance(looks_like_header(text), bool)


# ---------------------------------------------------------------------------
# looks_like_header


@pytest.mark.parametrize(
    "text",
    [
        "phone,name",
        "msisdn;name",
        "Number\tName",
        "telefon,ad",
        "Telefon Numarası;Ad Soyad",
        '"phone","name"',
        '"Telefon";"Ad"',
        "phone",
        "MSISDN",
        "phone number (E.164),name",
        "Tel 1;Tel 2;Ad",
        "ad,telefon",
    ],
)
def test_headers(text: str) -> None:
    assert looks_like_header(text)
    assert isinstance(parse_line(text), Entry)  # reaches the header check


@pytest.mark.parametrize(
    "text",
    [
        "0532 123 45 67",
        "+90 532 123 4567,Ayşe",
        "05321234567,phone",
        "Ayşe,0532 123 45 67",  # name-first data, not a header
        "Ayşe Yılmaz\t05321234567",
        "phone 05321234567",
        "",
        ",,",
        "12345,name",
    ],
)
def test_not_headers(text: str) -> None:
    assert not looks_like_header(text)
