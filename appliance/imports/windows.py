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

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from appliance.imports.chunk import REJECT_LINE_KEEP, Chunk, parse_chunk
from appliance.imports.lines import PayloadEncodingError, iter_lines, parse_line, skip_lines
from appliance.imports.payload_stream import WholeText


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
    not kept), the rejected lines, the blank and header lines.

    Kept compact, since a parser holds a whole window's (50,000 lines by default):
    the numbers are the keys of one dict, in the lines' order, whose values are the
    names, and only a repeated number has an entry in ``repeats``; no tuple or index
    is made per number until a part of ``chunk_lines`` of them is sent."""

    def __init__(self, job_id: int, line: int, base: int = 0) -> None:
        self.job_id, self.from_processed = job_id, line
        self.base = base  # the whole text's offset of the chunks' text's first character
        self.to_processed, self.to_offset = line, 0
        self.names: dict[str, str | None] = {}
        self.repeats: dict[str, int] = {}
        self.rejects: list[tuple[int, str, str, int]] = []
        self.blank = self.header = 0

    def add(self, chunk: Chunk) -> None:
        names, repeats = self.names, self.repeats
        for row in chunk.rows:
            msisdn = row.msisdn
            if row.header:
                self.header += 1
            elif msisdn is None:
                self.rejects.append((row.line_number, row.line[:REJECT_LINE_KEEP], row.reason,
                                     max(row.line_length, len(row.line))))
            elif msisdn in names:
                repeats[msisdn] = repeats.get(msisdn, 0) + 1
            else:
                names[msisdn] = row.name
        self.blank += chunk.blank
        self.to_processed, self.to_offset = chunk.to_processed, self.base + chunk.to_offset

    def parts(self, part_size: int, skip: int = 0) -> Iterator[ParsedChunk]:
        """Parts of ``part_size`` of the distinct numbers, sorted (a window of one part
        keeps the lines' order), leaving out the first ``skip`` (applied already)."""
        names, repeats = self.names, self.repeats
        size = max(1, part_size)
        order = sorted(names) if len(names) > size or skip else list(names)
        for start in range(skip, len(order), size):
            numbers = order[start:start + size]
            yield self.part([(msisdn, names[msisdn]) for msisdn in numbers],
                            [repeats.get(msisdn, 0) for msisdn in numbers], start,
                            start + size >= len(order))
        if skip >= len(order):  # no numbers (or all of them in): the last part is the rest
            yield self.part([], [], len(order), True)

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


class TextSource(Protocol):
    """Where a parser's text comes from: the whole text (:class:`WholeText`) or the
    payload decoded as it is needed (:class:`appliance.imports.payload_stream.StreamedText`)."""

    def lines(self, offset: int, count: int) -> tuple[str, int]:
        """``(text, base)``: ``text[offset - base:]`` holds ``count`` whole lines from
        character ``offset`` of the whole text on (or all that is left)."""
        ...


def parts_of(request: Request, text: str | TextSource,
             between_windows: Callable[[], None] | None = None) -> Iterator[ParsedChunk]:
    """The request's parts that are this parser's, in order, to the end of the job.

    A window is parsed in the text ``text.lines`` gives for it, with offsets into
    that text (``base`` before it), and the parts carry offsets into the whole text.
    ``between_windows`` is called once a window's parts are all taken and the window
    let go (a parser process gives its heap back there)."""
    source = WholeText(text) if isinstance(text, str) else text
    line, offset, seen = request.line, request.offset, request.entries_seen
    first_to, skip = request.first_to, request.skip
    turn = 0
    while True:
        size = max(1, first_to - line) if first_to is not None else request.window_lines
        held, base = source.lines(offset, size)
        if turn % request.stride != request.phase:
            line, local, seen = _step_over(held, line, offset - base, seen, size)
            offset = base + local
            if line >= request.total:
                return  # the job ends in a window of another child's
        else:
            window = Window(request.job_id, line, base)
            end = line + size
            local = offset - base
            while True:  # chunk by chunk, so that only the window's numbers are kept
                chunk = parse_chunk(request.job_id, held, line, local,
                                    min(request.chunk_lines, end - line), request.region, seen)
                window.add(chunk)
                moved = chunk.to_processed != line
                line, local, seen = chunk.to_processed, chunk.to_offset, seen + len(chunk.rows)
                if not moved or line >= end or line >= request.total:
                    break
            offset = base + local
            yield from window.parts(request.chunk_lines, skip)
            if line >= request.total or window.to_processed == window.from_processed:
                return
            del window
            if between_windows is not None:
                between_windows()
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
