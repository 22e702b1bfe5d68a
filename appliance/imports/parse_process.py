"""Parsing an import in child processes, a window of lines at a time.

The chunk parser (:func:`appliance.imports.chunk.parse_chunk`) is a pure function of a
slice of the payload's text. For a large job the worker hands the parsing to child
processes (``multiprocessing``, ``spawn``: the same in the frozen binary, where
``build/entry.py`` calls ``freeze_support``): each reads the stored payload itself
through a read-only connection, decodes it once, and parses windows of lines from the
position it was given, while the server's writer commits the parts before.

**Windows.** A large job is read :data:`WINDOW_CHUNKS` chunks of lines at a time (a
window, 100,000 lines by default). A window's distinct numbers are sorted and sent in
parts of ``chunk_lines`` numbers (:class:`ParsedChunk`), so the contacts index takes
each part as a run of neighbouring keys: a part's commit writes a few pages of the
index instead of one page a row, which is what bounds an import into a large list.
The window's last part brings its rejected lines, blank lines and header, and moves
the job to the window's end. With several children, window ``k`` is parsed by child
``k % processes``; the others step over it (counting its lines, fast) and the server
takes the parts from the children in turn, so they come in order.

The children write nothing: every part is applied by the worker in one write unit
guarded by the job's position, its window and how many of the window's numbers are in
(IMP-4). A window is a pure function of the text, its start and its size (kept on the
job while it is part-way), so a child that dies, a server killed with ``kill -9`` or a
job cancelled meanwhile cost at most a window parsed again, and the parts already in
are skipped. Small jobs are parsed in a worker thread (:class:`LocalParser`), a window
of one chunk at a time: starting a process is not worth it for them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import anyio.to_thread

from appliance.imports.lines import PayloadEncodingError, decode_payload
from appliance.imports.windows import Parsed, ParsedChunk, PayloadGone, Request, parts_of

log = logging.getLogger("appliance.imports")
# Jobs of at least this many lines are parsed in child processes.
PROCESS_MIN_LINES = 20_000
WINDOW_CHUNKS = 50  # a child's window: this many chunks of lines (100,000 by default)
AHEAD = 4  # parts the server keeps read from each child, beyond the pipe's own buffer
_POLL_S = 5.0  # how often a wait for a child checks that it is still there
STOP = "stop"  # sent to a child: drop the current request
FORGET = "forget"  # sent to a child: drop the current request and the text it keeps
NICENESS = 10  # added to a child's nice value


def parser_processes() -> int:
    """Children for a large import: one a core beside the server's, at least one, two
    at most (past that the writer's core is the bound)."""
    return max(1, min(2, (os.cpu_count() or 1)))


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
    """The child's loop: parse what it is asked to, until the server goes away.

    It runs at a lower priority (``nice`` +:data:`NICENESS`): on a busy machine the
    server's event loop and writer come first, so an import never slows the API or the
    report intake for long; on an idle one the parsers still have the cores."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICENESS)
    texts: dict[int, str] = {}
    try:
        while True:
            request: Request | str | None = commands.recv()
            if request is None:
                return
            if request == STOP:  # the job was cancelled or moved: wait for the next one
                continue
            if request == FORGET:  # no job to parse: give the text's memory back
                if texts:
                    texts.clear()
                    _trim_heap()
                continue
            assert isinstance(request, Request)
            _serve(request, texts, db_path, commands, results)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return  # the server stopped (or was killed): nothing of ours to finish


def _trim_heap() -> None:
    """Hand the freed heap back to the system (glibc keeps it otherwise); elsewhere a
    no-op."""
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _serve(request: Request, texts: dict[int, str], db_path: str, commands: Connection,
           results: Connection) -> None:
    """Send the request's parts, the job's text loaded first unless ``texts`` has it
    (a function of its own, so that no local keeps the text once ``texts`` lets go)."""
    try:
        text = texts.get(request.job_id)
        if text is None:
            found = _load_text(db_path, request.job_id)
            if found is None:
                results.send((request.number, PayloadGone()))
                return
            texts.clear()  # one job at a time: keep only its text
            text = texts[request.job_id] = found
    except PayloadEncodingError as exc:
        results.send((request.number, exc))
        return
    for part in parts_of(request, text):
        if commands.poll():  # a new request (or the end) supersedes this one
            return
        results.send((request.number, part))


class _Child:
    """One child process: its pipes, and a thread reading what it sends into a queue."""

    def __init__(self, db_path: str, index: int, current: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        commands_child, self.commands = ctx.Pipe(duplex=False)
        self.results, results_child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child,
                                args=(commands_child, results_child, db_path),
                                name=f"appliance-import-parser-{index}", daemon=True)
        self.proc.start()
        commands_child.close()
        results_child.close()
        self.queue: queue.Queue[tuple[int, Parsed] | None] = queue.Queue(maxsize=AHEAD)
        self._current = current  # () -> the request number whose parts are wanted
        threading.Thread(target=self._read, name=f"appliance-import-parser-reader-{index}",
                         daemon=True).start()
        log.info("import parser process started", extra={"pid": self.proc.pid})

    def _read(self) -> None:
        try:
            while True:
                number, parsed = self.results.recv()
                if number == self._current():  # a superseded request's parts are dropped
                    self.queue.put((number, parsed))
        except (EOFError, OSError):
            self.queue.put(None)  # the child is gone

    def alive(self) -> bool:
        return bool(self.proc.is_alive())

    def send(self, message: Request | str | None) -> None:
        with contextlib.suppress(OSError):
            self.commands.send(message)

    def drain(self) -> None:
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return

    def close(self) -> None:
        self.send(None)
        self.commands.close()
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)
        self.results.close()


class ChildParser:
    """The server's side of the children: ``processes`` of them for the appliance's
    life, all started again if one dies. Window ``k`` of a request is parsed by child
    ``k % processes``; :meth:`next` takes each window's parts from the children in turn,
    so they come in order."""

    def __init__(self, db_path: str, processes: int = 1) -> None:
        self.db_path = db_path
        self.processes = max(1, processes)
        self._children: list[_Child] = []
        self._current = 0
        self._numbers = 0
        self._turn = 0
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        if self._children and all(child.alive() for child in self._children):
            return
        self.close()
        self._children = [_Child(self.db_path, i, lambda: self._current)
                          for i in range(self.processes)]

    def start(self, request: Request) -> None:
        """Parse ``request`` (its ``number``, ``stride`` and ``phase`` are set here)."""
        with self._lock:
            self._ensure()
            self._numbers += 1
            self._current = self._numbers
            self._turn = 0
            stride = len(self._children)
            for phase, child in enumerate(self._children):
                child.drain()
                child.send(replace(request, number=self._current, stride=stride, phase=phase))

    def _get(self) -> Parsed:
        child = self._children[self._turn] if self._children else None
        while True:
            got: tuple[int, Parsed] | None = None
            if child is not None:
                try:
                    got = child.queue.get(timeout=_POLL_S)
                except queue.Empty:
                    if child.alive():
                        continue  # slow (a large payload, a busy machine), not gone
            if got is None:
                self.close()  # gone: the next start begins new ones
                raise ChildGone("an import parser process ended")
            number, parsed = got
            if number == self._current:
                if not isinstance(parsed, ParsedChunk) or parsed.last:
                    self._turn = (self._turn + 1) % len(self._children)
                return parsed

    async def next(self) -> Parsed:
        return await anyio.to_thread.run_sync(self._get)

    def stop(self, forget: bool = False) -> None:
        """Stop parsing the current request (the children wait for the next one); with
        ``forget``, the children drop the job's text too (there is no job to parse)."""
        with self._lock:
            self._numbers += 1
            self._current = self._numbers
            for child in self._children:
                child.drain()
                child.send(FORGET if forget else STOP)

    def close(self) -> None:
        children, self._children = self._children, []
        for child in children:
            child.close()


class ChildGone(RuntimeError):
    """The child process ended (killed, or out of memory): the worker parses locally."""


class LocalParser:
    """The same interface, parsing in a worker thread of this process."""

    def __init__(self, load_text: Any) -> None:
        self._load_text = load_text  # job id -> decoded text or None (may raise)
        self._request: Request | None = None
        self._parts: Iterator[ParsedChunk] | None = None
        self._text: str | None = None
        self._text_job: int | None = None

    def start(self, request: Request) -> None:
        self._request = replace(request, stride=1, phase=0)
        self._parts = None
        if self._text_job != request.job_id:
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
        if self._parts is None:
            self._parts = parts_of(request, self._text)
        part = next(self._parts, None)
        assert part is not None, "asked for a part past the end of the job"
        return part

    async def next(self) -> Parsed:
        return await anyio.to_thread.run_sync(self._parse)

    def stop(self, forget: bool = True) -> None:
        self._request = self._parts = None
        self._text = self._text_job = None

    def close(self) -> None:
        self.stop()
