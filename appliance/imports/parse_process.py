"""Parsing an import in a second process, so that both cores work at once.

The chunk parser (:func:`appliance.imports.chunk.parse_chunk`) is a pure function of a
slice of the payload's text. For a large job the worker hands the parsing to a child
process (``multiprocessing``, ``spawn``: the same in the frozen binary, where
``build/entry.py`` calls ``freeze_support``): the child reads the stored payload
itself through a read-only connection, decodes it once, and parses chunk after chunk
from the position it was given, while the server's writer commits the chunks before.
What it sends back is compact (:class:`ParsedChunk`: the chunk's distinct numbers with
their names and repeats, its rejected lines), so the server spends little time
reading it. The child runs ahead of the writer by at most a few chunks: a full pipe
blocks it.

The child writes nothing: every chunk is applied by the worker in one write unit
guarded by the job's position (IMP-4), so a child that dies, a server killed with
``kill -9`` or a job cancelled meanwhile cost at most a chunk parsed twice. Small jobs
are parsed in a worker thread as before (:class:`LocalParser`): starting a process is
not worth it for them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import queue
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import anyio.to_thread

from appliance.imports.chunk import parse_chunk
from appliance.imports.import_job import REJECT_LINE_KEEP, Chunk
from appliance.imports.lines import PayloadEncodingError, decode_payload

log = logging.getLogger("appliance.imports")
# Jobs of at least this many lines are parsed in the child process.
PROCESS_MIN_LINES = 20_000
AHEAD = 4  # chunks the server keeps read from the child, beyond the pipe's own buffer
_POLL_S = 5.0  # how often a wait for the child checks that it is still there
STOP = "stop"  # sent to the child: drop the current request


@dataclass(frozen=True)
class ParsedChunk:
    """One chunk's outcome, as the write unit needs it (cheap to send between processes).

    ``contacts`` are the chunk's distinct numbers in the order they first appear, with
    the name of that first line; ``repeats[i]`` is how many more lines of the chunk
    carry ``contacts[i]``; ``rejects`` are ``(line number, line as kept, reason, length
    of the whole line)``.
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

    @property
    def entries(self) -> int:
        """Non-blank lines of the chunk (what header detection counts)."""
        return len(self.contacts) + sum(self.repeats) + len(self.rejects) + self.header


def compact(chunk: Chunk) -> ParsedChunk:
    index: dict[str, int] = {}
    contacts: list[tuple[str, str | None]] = []
    repeats: list[int] = []
    rejects: list[tuple[int, str, str, int]] = []
    header = 0
    for row in chunk.rows:
        if row.header:
            header += 1
        elif row.msisdn is None:
            rejects.append((row.line_number, row.line[:REJECT_LINE_KEEP], row.reason,
                            max(row.line_length, len(row.line))))
        else:
            at = index.get(row.msisdn)
            if at is None:
                index[row.msisdn] = len(contacts)
                contacts.append((row.msisdn, row.name))
                repeats.append(0)
            else:
                repeats[at] += 1
    return ParsedChunk(chunk.job_id, chunk.from_processed, chunk.to_processed, chunk.to_offset,
                       chunk.blank, header, contacts, repeats, rejects)


@dataclass(frozen=True)
class Request:
    """Parse job ``job_id`` from line ``line`` (character ``offset``) to its end."""

    number: int
    job_id: int
    region: str
    line: int
    offset: int
    entries_seen: int
    chunk_lines: int
    total: int


class PayloadGone(LookupError):
    """The job's stored payload is not there (pruned before the job finished)."""


# What a parser hands the worker: a chunk, or the reason there will be none.
Parsed = ParsedChunk | PayloadEncodingError | PayloadGone


def _load_text(db_path: str, job_id: int) -> str | None:
    """The job's payload, read from the SQLite file at ``db_path`` or, when it is a
    ``postgresql://`` URL, from that database."""
    from appliance.imports.import_job import load_payload

    if db_path.startswith(("postgresql://", "postgres://")):
        from appliance.store import pg_store
        from appliance.store.pg import PgConnection

        pg = PgConnection.connect(db_path, application_name="appliance-import-parser")
        try:
            payload = pg_store.in_snapshot(pg, lambda c: load_payload(c, job_id))
        finally:
            pg.close()
        return None if payload is None else decode_payload(payload)
    from appliance.store.readers import in_snapshot
    from appliance.store.schema import open_connection

    conn = open_connection(db_path, readonly=True)
    try:
        payload = in_snapshot(conn, lambda c: load_payload(c, job_id))
    finally:
        conn.close()
    return None if payload is None else decode_payload(payload)


def _child(commands: Connection, results: Connection, db_path: str) -> None:
    """The child's loop: parse what it is asked to, until the server goes away."""
    texts: dict[int, str] = {}
    try:
        while True:
            request: Request | str | None = commands.recv()
            if request is None:
                return
            if request == STOP:  # the job was cancelled or moved: wait for the next one
                continue
            assert isinstance(request, Request)
            try:
                text = texts.get(request.job_id)
                if text is None:
                    found = _load_text(db_path, request.job_id)
                    if found is None:
                        results.send((request.number, PayloadGone()))
                        continue
                    texts.clear()  # one job at a time: keep only its text
                    text = texts[request.job_id] = found
            except PayloadEncodingError as exc:
                results.send((request.number, exc))
                continue
            line, offset, seen = request.line, request.offset, request.entries_seen
            while not commands.poll():  # a new request (or the end) supersedes this one
                chunk = parse_chunk(request.job_id, text, line, offset, request.chunk_lines,
                                    request.region, seen)
                results.send((request.number, compact(chunk)))
                if chunk.to_processed >= request.total or chunk.to_processed == line:
                    break
                line, offset, seen = chunk.to_processed, chunk.to_offset, seen + len(chunk.rows)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return  # the server stopped (or was killed): nothing of ours to finish


class ChildParser:
    """The server's side of the child: one child for the appliance's life, restarted
    if it dies; a thread reads what it sends into a small queue."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self._proc: Any = None
        self._commands: Connection | None = None
        self._results: Connection | None = None
        self._queue: queue.Queue[tuple[int, Parsed] | None] = queue.Queue(maxsize=AHEAD)
        self._current = 0
        self._numbers = 0
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        self.close()
        ctx = multiprocessing.get_context("spawn")
        commands_child, commands = ctx.Pipe(duplex=False)
        results, results_child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(commands_child, results_child, self.db_path),
                           name="appliance-import-parser", daemon=True)
        proc.start()
        commands_child.close()
        results_child.close()
        self._proc, self._commands, self._results = proc, commands, results
        self._queue = queue.Queue(maxsize=AHEAD)
        threading.Thread(target=self._read, args=(results, self._queue),
                         name="appliance-import-parser-reader", daemon=True).start()
        log.info("import parser process started", extra={"pid": proc.pid})

    def _read(self, results: Connection, into: queue.Queue[tuple[int, Parsed] | None]) -> None:
        try:
            while True:
                number, parsed = results.recv()
                if number == self._current:  # a superseded request's chunks are dropped
                    into.put((number, parsed))
        except (EOFError, OSError):
            into.put(None)  # the child is gone

    def start(self, job_id: int, region: str, line: int, offset: int, entries_seen: int,
              chunk_lines: int, total: int) -> None:
        with self._lock:
            self._ensure()
            self._numbers += 1
            self._current = self._numbers
            self._drain()
            assert self._commands is not None
            self._commands.send(Request(self._current, job_id, region, line, offset,
                                        entries_seen, chunk_lines, total))

    def _drain(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def _get(self) -> Parsed:
        while True:
            try:
                got = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if self._proc is not None and self._proc.is_alive():
                    continue  # slow (a large payload, a busy machine), not gone
                got = None
            if got is None:
                self.close()  # gone: the next start begins a new one
                raise ChildGone("the import parser process ended")
            number, parsed = got
            if number == self._current:
                return parsed

    async def next(self) -> Parsed:
        return await anyio.to_thread.run_sync(self._get)

    def stop(self) -> None:
        """Stop parsing the current request (the child waits for the next one)."""
        with self._lock:
            self._numbers += 1
            self._current = self._numbers
            self._drain()
            if self._commands is not None:
                with contextlib.suppress(OSError):
                    self._commands.send(STOP)

    def close(self) -> None:
        if self._commands is not None:
            with contextlib.suppress(OSError):
                self._commands.send(None)
            self._commands.close()
            self._commands = None
        if self._proc is not None:
            self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)
            self._proc = None
        if self._results is not None:
            self._results.close()
            self._results = None


class ChildGone(RuntimeError):
    """The child process ended (killed, or out of memory): the worker parses locally."""


class LocalParser:
    """The same interface, parsing in a worker thread of this process."""

    def __init__(self, load_text: Any) -> None:
        self._load_text = load_text  # job id -> decoded text or None (may raise)
        self._request: Request | None = None
        self._text: str | None = None
        self._text_job: int | None = None

    def start(self, job_id: int, region: str, line: int, offset: int, entries_seen: int,
              chunk_lines: int, total: int) -> None:
        self._request = Request(0, job_id, region, line, offset, entries_seen, chunk_lines,
                                total)
        if self._text_job != job_id:
            self._text = self._text_job = None

    def _parse(self) -> Parsed:
        request = self._request
        assert request is not None
        if self._text is None:
            try:
                text = self._load_text(request.job_id)
            except PayloadEncodingError as exc:
                return exc
            if text is None:
                return PayloadGone()
            self._text, self._text_job = text, request.job_id
        chunk = parse_chunk(request.job_id, self._text, request.line, request.offset,
                            request.chunk_lines, request.region, request.entries_seen)
        self._request = Request(0, request.job_id, request.region, chunk.to_processed,
                                chunk.to_offset, request.entries_seen + len(chunk.rows),
                                request.chunk_lines, request.total)
        return compact(chunk)

    async def next(self) -> Parsed:
        return await anyio.to_thread.run_sync(self._parse)

    def stop(self) -> None:
        self._request = None
        self._text = self._text_job = None

    def close(self) -> None:
        self.stop()
