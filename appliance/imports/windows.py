"""Windows of an import's lines: what a parser makes of them, pure CPU work.

A large job is read :data:`appliance.imports.parse_process.WINDOW_CHUNKS` chunks of lines
at a time (a window). A window's distinct numbers are sorted and sent in parts of
``chunk_lines`` numbers (:class:`ParsedChunk`), so the contacts index takes each part as
a run of neighbouring keys; the window's last part brings its rejected lines, blank
lines and header, and moves the job to the window's end (written by
:func:`appliance.imports.apply_window.apply_parsed`). A window is a pure function of the
text, its start and its size, so it can be parsed again after any crash. With several
parsers, window ``k`` is parsed by parser ``k % stride``; the others step over it
(:func:`parts_of`). How the parsers run (child processes or a thread) is
:mod:`appliance.imports.parse_process`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from appliance.imports.chunk import REJECT_LINE_KEEP, Chunk, parse_chunk
from appliance.imports.lines import PayloadEncodingError, iter_lines, parse_line, skip_lines


@dataclass(frozen=True)
class ParsedChunk:
    """One part of a window's outcome, as the write unit needs it (cheap to send
    between processes).

    The window covers lines ``from_processed`` + 1 to ``to_processed`` (ending at
    character ``to_offset``). ``contacts`` are some of its distinct numbers, with the
    name of the first line that carries each; ``repeats[i]`` is how many more lines of
    the window carry ``contacts[i]``; ``done_before`` is how many of the window's
    numbers come before this part. Only the ``last`` part has the window's ``blank``
    and ``header`` lines and its ``rejects``: ``(line number, line as kept, reason,
    length of the whole line)``.
    """

    job_id: int
    from_processed: int
    to_processed: int
    to_offset: int
    blank: int
    header: int
    contacts: list[tuple[str, str | None]]
    repeats: list[int]
    rejects: list[tuple[int, str, str, int]]
    done_before: int = 0
    last: bool = True

    @property
    def entries(self) -> int:
        """Non-blank lines of the chunk (what header detection counts)."""
        return len(self.contacts) + sum(self.repeats) + len(self.rejects) + self.header


class Window:
    """A window's outcome, gathered chunk by chunk: each distinct number once with the
    name of its first line and how many more lines repeat it (the lines themselves are
    not kept), the rejected lines, the blank and header lines."""

    def __init__(self, job_id: int, line: int) -> None:
        self.job_id, self.from_processed = job_id, line
        self.to_processed, self.to_offset = line, 0
        self.index: dict[str, int] = {}
        self.contacts: list[tuple[str, str | None]] = []
        self.repeats: list[int] = []
        self.rejects: list[tuple[int, str, str, int]] = []
        self.blank = self.header = 0

    def add(self, chunk: Chunk) -> None:
        index, contacts, repeats = self.index, self.contacts, self.repeats
        for row in chunk.rows:
            if row.header:
                self.header += 1
            elif row.msisdn is None:
                self.rejects.append((row.line_number, row.line[:REJECT_LINE_KEEP], row.reason,
                                     max(row.line_length, len(row.line))))
            else:
                at = index.get(row.msisdn)
                if at is None:
                    index[row.msisdn] = len(contacts)
                    contacts.append((row.msisdn, row.name))
                    repeats.append(0)
                else:
                    repeats[at] += 1
        self.blank += chunk.blank
        self.to_processed, self.to_offset = chunk.to_processed, chunk.to_offset

    def parts(self, part_size: int, skip: int = 0) -> list[ParsedChunk]:
        """Parts of ``part_size`` of the distinct numbers, sorted (a window of one part
        keeps the lines' order), leaving out the first ``skip`` (applied already)."""
        contacts, repeats = self.contacts, self.repeats
        size = max(1, part_size)
        if len(contacts) > size or skip:
            order = sorted(range(len(contacts)), key=lambda i: contacts[i][0])
            contacts = [contacts[i] for i in order]
            repeats = [repeats[i] for i in order]
        parts: list[ParsedChunk] = []
        for start in range(skip, len(contacts), size):
            last = start + size >= len(contacts)
            parts.append(self.part(contacts[start:start + size], repeats[start:start + size],
                                   start, last))
        if not parts:  # no numbers (or all of them in): the last part is the rest
            parts.append(self.part([], [], len(contacts), True))
        return parts

    def part(self, contacts: list[tuple[str, str | None]], repeats: list[int],
             done_before: int, last: bool) -> ParsedChunk:
        return ParsedChunk(self.job_id, self.from_processed, self.to_processed, self.to_offset,
                           self.blank if last else 0, self.header if last else 0, contacts,
                           repeats, self.rejects if last else [], done_before, last)


@dataclass(frozen=True)
class Request:
    """Parse job ``job_id`` from line ``line`` (character ``offset``) to its end, in
    windows of ``window_lines`` lines sent as parts of ``chunk_lines`` numbers.

    The first window ends at ``first_to`` when that is set (a window part-way, whose
    first ``skip`` numbers are in already). With several children this one parses
    windows ``phase``, ``phase + stride``, ... and steps over the others.
    """

    number: int
    job_id: int
    region: str
    line: int
    offset: int
    entries_seen: int
    chunk_lines: int
    total: int
    window_lines: int
    first_to: int | None = None
    skip: int = 0
    stride: int = 1
    phase: int = 0


class PayloadGone(LookupError):
    """The job's stored payload is not there (pruned before the job finished)."""


# What a parser hands the worker: a chunk, or the reason there will be none.
Parsed = ParsedChunk | PayloadEncodingError | PayloadGone


def parts_of(request: Request, text: str) -> Iterator[ParsedChunk]:
    """The request's parts that are this parser's, in order, to the end of the job."""
    line, offset, seen = request.line, request.offset, request.entries_seen
    first_to, skip = request.first_to, request.skip
    turn = 0
    while True:
        size = max(1, first_to - line) if first_to is not None else request.window_lines
        if turn % request.stride != request.phase:
            line, offset, seen = _step_over(text, line, offset, seen, size)
            if line >= request.total:
                return  # the job ends in a window of another child's
        else:
            window = Window(request.job_id, line)
            end = line + size
            while True:  # chunk by chunk, so that only the window's numbers are kept
                chunk = parse_chunk(request.job_id, text, line, offset,
                                    min(request.chunk_lines, end - line), request.region, seen)
                window.add(chunk)
                moved = chunk.to_processed != line
                line, offset, seen = chunk.to_processed, chunk.to_offset, seen + len(chunk.rows)
                if not moved or line >= end or line >= request.total:
                    break
            yield from window.parts(request.chunk_lines, skip)
            if line >= request.total or window.to_processed == window.from_processed:
                return
        first_to, skip = None, 0
        turn += 1


def _step_over(text: str, line: int, offset: int, seen: int,
               count: int) -> tuple[int, int, int]:
    """The position ``count`` lines on (a window another child parses), and ``seen``
    made non-zero if a non-blank line came on the way (only that matters to header
    detection, and only until the first)."""
    if seen:
        return (*skip_lines(text, line, offset, count), seen)
    at = (line, offset)
    for item, after in iter_lines(text, line, offset):
        if parse_line(item.text) is not None:  # the job's first entry: the header candidate
            rest = count - (item.number - line)
            return (*skip_lines(text, item.number, after, rest), 1)
        at = (item.number, after)
        if item.number - line >= count:
            break
    return (*at, 0)
