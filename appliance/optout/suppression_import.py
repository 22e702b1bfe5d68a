"""Reading an uploaded suppression list: one number per line, optionally a reason.

The lines are read exactly as a contact import reads them (``appliance.imports.lines``:
UTF-8 or UTF-16 with a BOM, any line ending, cells split by tab, ``;`` or ``,`` with
CSV quoting, a header row skipped) and each number is normalised exactly as an import
normalises it (``appliance.imports.normalise``), so a number suppressed from a file is
the same string a list holds. The cell that is not the number (an import's "name") is
the entry's reason; without one, the reason is ``imported``.

Pure CPU work, no store: :func:`read_suppressions` runs in a worker thread and the
handler writes the result with ``suppressions.add_many``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from appliance.imports.lines import (
    ParseError,
    decode_payload,
    iter_lines,
    looks_like_header,
    parse_line,
)
from appliance.imports.normalise import Invalid, normalise_msisdn

DEFAULT_REASON: Final = "imported"
MAX_LINES: Final = 100_000
MAX_BYTES: Final = 8 * 1024 * 1024
MAX_REJECTS_SHOWN: Final = 1000


@dataclass(frozen=True)
class Reject:
    line_number: int
    line: str
    reason: str


@dataclass
class ReadList:
    """What an uploaded list holds: the numbers to add (first occurrence of each) and
    the lines that are not numbers."""

    entries: list[tuple[str, str]] = field(default_factory=list)  # (msisdn, reason)
    repeats: int = 0  # lines whose number came earlier in the same upload
    rejects: list[Reject] = field(default_factory=list)
    lines: int = 0
    blank: int = 0
    header_skipped: int = 0


def read_suppressions(payload: bytes, region: str) -> ReadList:
    """Read an uploaded list; ``PayloadEncodingError`` (a ValueError) when it is not text."""
    text = decode_payload(payload)
    out = ReadList()
    seen: set[str] = set()
    for line, _end in iter_lines(text):
        out.lines = line.number
        parsed = parse_line(line.text)
        if parsed is None:
            out.blank += 1
            continue
        if isinstance(parsed, ParseError):
            out.rejects.append(Reject(line.number, line.text, parsed.reason))
            continue
        first = not seen and not out.rejects and out.header_skipped == 0
        if first and looks_like_header(line.text):
            out.header_skipped += 1
            continue
        number = normalise_msisdn(parsed.number_text, region)
        if isinstance(number, Invalid):
            out.rejects.append(Reject(line.number, line.text, number.reason))
            continue
        if number.msisdn in seen:
            out.repeats += 1
            continue
        seen.add(number.msisdn)
        out.entries.append((number.msisdn, parsed.name or DEFAULT_REASON))
    return out
