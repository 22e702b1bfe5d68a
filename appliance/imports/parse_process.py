"""Parsing an import in child processes, a window of lines at a time.

The chunk parser (:func:`appliance.imports.chunk.parse_chunk`) is a pure function of a
slice of the payload's text. For a large job the worker hands the parsing to child
processes (``multiprocessing``, ``spawn``: the same in the frozen binary, where
``build/entry.py`` calls ``freeze_support``; what a child runs and imports is
:mod:`appliance.imports.parser_child`): each reads the stored payload itself through a
read-only connection, a piece at a time, decoding it as it goes, and parses windows of
lines from the position it was given, while the server's writer commits the parts
before. How many children there are follows the cores and the memory the machine
allows (:mod:`appliance.imports.parser_budget`).

**Windows.** A large job is read :data:`WINDOW_CHUNKS` chunks of lines at a time (a
window, 50,000 lines by default). A window's distinct numbers are sorted and sent in
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
of one chunk at a time: starting a process is not worth it for them; so are large ones
when the memory allows no child (the payload read a piece at a time there too).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import anyio.to_thread

from appliance.imports import parser_child
from appliance.imports.lines import PayloadEncodingError
from appliance.imports.parser_child import FORGET, STOP, Opened
from appliance.imports.parser_launch import ParserProcess
from appliance.imports.payload_stream import (
    PayloadVanished,
    StreamedText,
    check_payload,
)
from appliance.imports.windows import Parsed, ParsedChunk, PayloadGone, Request, parts_of

log = logging.getLogger("appliance.imports")
# Jobs of at least this many lines are parsed in child processes.
PROCESS_MIN_LINES = 20_000
WINDOW_CHUNKS = 25  # a child's window: this many chunks of lines (50,000 by default)
AHEAD = 4  # parts the server keeps read from each child, beyond the pipe's own buffer
_POLL_S = 5.0  # how often a wait for a child checks that it is still there


class _Child:
    """One child process: its pipes, and a thread reading what it sends into a queue."""

    def __init__(self, db_path: str, index: int, current: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        commands_child, self.commands = ctx.Pipe(duplex=False)
        self.results, results_child = ctx.Pipe(duplex=False)
        self.proc = ParserProcess(target=parser_child.child,
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
    """The same interface, parsing in a worker thread of this process, the payload read
    a piece at a time as in a child."""

    def __init__(self, open_payload: Callable[[int], Opened | None]) -> None:
        self._open = open_payload  # job id -> the payload opened, or None
        self._request: Request | None = None
        self._parts: Iterator[ParsedChunk] | None = None
        self._text: StreamedText | None = None
        self._close: Callable[[], None] | None = None
        self._text_job: int | None = None

    def start(self, request: Request) -> None:
        self._request = replace(request, stride=1, phase=0)
        self._parts = None
        if self._text_job != request.job_id:
            self._drop()

    def _drop(self) -> None:
        close, self._close = self._close, None
        self._text = self._text_job = None
        if close is not None:
            close()

    def _parse(self) -> Parsed:
        request = self._request
        assert request is not None
        try:
            if self._text is None:
                opened = self._open(request.job_id)
                if opened is None:
                    return PayloadGone()
                read, size, self._close = opened
                self._text_job = request.job_id
                check_payload(read, size)
                self._text = StreamedText(read, size)
            if self._parts is None:
                self._parts = parts_of(request, self._text)
            part = next(self._parts, None)
        except PayloadEncodingError as exc:
            self._drop()
            return exc
        except PayloadVanished:
            self._drop()
            return PayloadGone()
        assert part is not None, "asked for a part past the end of the job"
        return part

    async def next(self) -> Parsed:
        return await anyio.to_thread.run_sync(self._parse)

    def stop(self, forget: bool = True) -> None:
        self._request = self._parts = None
        self._drop()

    def close(self) -> None:
        self.stop()
