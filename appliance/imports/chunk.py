"""Turning one slice of a stored payload into a :class:`Chunk` of outcomes.

Pure CPU work (no store access), so it can run in a worker thread or process.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.imports.lines import ParseError, iter_lines, looks_like_header, parse_line

# A rejected line is kept up to this many characters, with its full length beside it.
REJECT_LINE_KEEP = 1000


@dataclass(frozen=True)
class ChunkRow:
    """One non-blank line's outcome, as the parser decided it."""

    line_number: int
    msisdn: str | None  # None: rejected
    name: str | None = None
    line: str = ""
    reason: str = ""
    header: bool = False
    line_length: int = 0  # of the whole line, when ``line`` was cut to REJECT_LINE_KEEP


def rejected_row(line_number: int, text: str, reason: str) -> ChunkRow:
    """A rejected line's outcome; a long line is kept shortened, with its length."""
    return ChunkRow(line_number, None, line=text[:REJECT_LINE_KEEP], reason=reason,
                    line_length=len(text))


@dataclass(frozen=True)
class Chunk:
    job_id: int
    from_processed: int
    to_processed: int
    to_offset: int
    rows: list[ChunkRow]
    blank: int


def parse_chunk(
    job_id: int,
    text: str,
    start_line: int,
    start_offset: int,
    max_lines: int,
    region: str,
    entries_seen: int,
) -> Chunk:
    """Parse up to ``max_lines`` lines of ``text`` after line ``start_line``.

    ``entries_seen`` is how many non-blank lines the job has handled before: while
    it is 0, the first non-blank line may be a header row and is skipped as such.
    """
    # phonenumbers comes with the first chunk parsed, not with the server's start
    # (docs/architecture.md, "What a start imports").
    from appliance.imports.normalise import Invalid, normalise_msisdn

    rows: list[ChunkRow] = []
    blank = 0
    processed = start_line
    offset = start_offset
    for line, end in iter_lines(text, start_line, start_offset):
        processed = line.number
        offset = end
        parsed = parse_line(line.text)
        if parsed is None:
            blank += 1
        elif isinstance(parsed, ParseError):
            rows.append(rejected_row(line.number, line.text, parsed.reason))
        elif entries_seen == 0 and not rows and looks_like_header(line.text):
            rows.append(ChunkRow(line.number, None, line=line.text, header=True))
        else:
            result = normalise_msisdn(parsed.number_text, region)
            rows.append(rejected_row(line.number, line.text, result.reason)
                        if isinstance(result, Invalid)
                        else ChunkRow(line.number, result.msisdn, name=parsed.name,
                                      line=line.text))
        if processed - start_line >= max_lines:
            break
    return Chunk(job_id, start_line, processed, offset, rows, blank)

