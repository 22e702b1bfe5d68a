"""The report intake: ``/callbacks/*`` served by a second process (DLR-2, opt-in).

With ``[reports] intake_port`` set, the server starts a child process
(``multiprocessing``, ``spawn``: the same in the frozen binary) that listens on that
port (:mod:`appliance.web.intake_app`). The child does the HTTP, the signature and the
reading of the reports on its own core; the server keeps the one thing that must stay
with it, the write. For each callback the child sends the raw body and its reports over
a Unix socket pair (:mod:`appliance.reports.intake_link`). A thread here waits for
them and hands the writer one unit at a time that reads whatever has come and stores
it (:func:`appliance.web.callback_store.store_batch`, as the own port stores its
callbacks: all of them together, or, when that raises, each under a savepoint of its
own), so the callbacks' bytes are unpickled by the thread
that stores them rather than by a second one taking the GIL from it (1.13x the rate).
Once the writer has committed the unit, the outcomes go back in one frame, from the
writer's thread, and only then does the child answer. So a ``2xx`` from the intake's
port still means on disk.

**Restarts.** The listening socket is the server's, taken before anything starts
(:func:`appliance.web.listener.bind_socket`); the child gets a copy. If the child dies
(``kill -9``), the server starts another on the same socket, after
:data:`RESTART_BACKOFF_S` doubling up to :data:`MAX_BACKOFF_S` while it keeps dying, so
connections wait in the socket's backlog rather than being refused. If the server dies,
the child's link closes: it answers ``503`` to what is waiting and exits. A stop
(SIGTERM) is passed on to the child, which finishes its requests (their writes
included) before the server's writer stops.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import select
import signal
import socket
import threading
import time
from collections import Counter
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio.to_thread

from appliance.ops.observability.metrics import Metrics
from appliance.reports.apply import Receipt
from appliance.reports.intake_link import callback_of, frame, frames
from appliance.runtime import Runtime
from appliance.store.connection import Connection
from appliance.store.writer import WriterClosed
from appliance.web.callback_check import note_receipt
from appliance.web.callback_store import Callback, store_batch
from appliance.web.intake_app import serve_intake

log = logging.getLogger("appliance.callbacks")
RESTART_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0
STEADY_S = 30.0  # a child that lived this long resets the backoff
ROUTE = "/callbacks/{provider}"


class _Drain:
    """The link as the writer's thread reads it, and the frames it found that are not
    callbacks (for the link's own thread to note in ``/metrics``)."""

    def __init__(self, link: socket.socket) -> None:
        self.link = link
        self.buffer = bytearray()
        self.eof = False
        self.others: list[tuple[Any, ...]] = []


class _Taken:
    """What one unit took from the link; ``ran`` is set once it has read it."""

    def __init__(self) -> None:
        self.batch: list[Callback] = []
        self.ran = threading.Event()


class IntakeEdge:
    """The intake's edge, as its process last reported it, for the server's
    ``/metrics``: the refusals are summed over every process it ran (counters never
    go back), the open connections and bodies held are the running one's."""

    def __init__(self) -> None:
        self.open_connections = 0
        self.body_bytes_held = 0
        self._refused: Counter[str] = Counter()
        self._refused_before: Counter[str] = Counter()  # by the processes that ended
        self._budget_refused = 0
        self._budget_refused_before = 0

    def update(self, open_connections: int, refused: dict[str, int], held: int,
               budget_refused: int) -> None:
        self.open_connections, self.body_bytes_held = open_connections, held
        self._refused, self._budget_refused = Counter(refused), budget_refused

    def child_gone(self) -> None:
        self._refused_before += self._refused
        self._budget_refused_before += self._budget_refused
        self.update(0, {}, 0, 0)

    @property
    def refused(self) -> Counter[str]:
        return self._refused_before + self._refused

    @property
    def budget_refused(self) -> int:
        return self._budget_refused_before + self._budget_refused


class ReportIntake:
    """The intake process and the server's end of its link."""

    def __init__(self, appliance: Runtime, metrics: Metrics, listening: socket.socket,
                 log_file: Path | None = None, secrets: list[str] | None = None) -> None:
        self.appliance = appliance
        self.metrics = metrics
        self.listening = listening
        self.log_file = log_file
        self.secrets = secrets or []
        self.restarts = 0
        self.edge = IntakeEdge()
        self._process: Any = None
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    @property
    def up(self) -> bool:
        process = self._process
        return process is not None and bool(process.is_alive())

    def start(self) -> None:
        self._supervisor = threading.Thread(target=self._supervise, name="report-intake",
                                            daemon=True)
        self._supervisor.start()

    def _spawn(self) -> tuple[Any, socket.socket]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        settings = self.appliance.settings
        process = multiprocessing.get_context("spawn").Process(
            target=serve_intake, name="appliance-report-intake", daemon=True,
            args=(self.listening, theirs, settings, self.log_file, self.secrets))
        process.start()
        theirs.close()
        log.info("report intake started", extra={
            "pid": process.pid, "url": settings.report_callback_base + "/callbacks/"})
        return process, ours

    def _supervise(self) -> None:
        backoff = RESTART_BACKOFF_S
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                process, link = self._spawn()
            except Exception:  # tried again after the backoff
                log.exception("report intake could not start")
            else:
                self._process = process
                self._serve(link)
                link.close()
                self.edge.child_gone()
                process.join(5.0)
                if self._stopping.is_set():
                    return
                self.restarts += 1
                log.error("report intake process exited (code %s); starting another",
                          process.exitcode)
            if time.monotonic() - started > STEADY_S:
                backoff = RESTART_BACKOFF_S
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _serve(self, link: socket.socket) -> None:
        """Until the child's end of the link closes: wait for its frames here, and have
        them read and stored by the writer's thread, one unit for whatever came, so
        that the callbacks' bytes are handled by the one thread that stores them."""
        link.setblocking(False)
        poller = select.poll()
        poller.register(link, select.POLLIN | select.POLLHUP)
        drain = _Drain(link)
        writer = self.appliance.store.writer
        while not drain.eof:
            poller.poll()
            taken = _Taken()

            def unit(conn: Connection, taken: _Taken = taken) -> list[Receipt | None]:
                return self._drain(conn, drain, taken)

            def answer(future: Future[list[Receipt | None]], taken: _Taken = taken) -> None:
                taken.ran.set()  # a unit the writer could not run read nothing
                self._answer(link, taken.batch, future)

            try:
                future = writer.submit(unit)
            except (WriterClosed, RuntimeError):
                return
            future.add_done_callback(answer)
            taken.ran.wait()
            self._observe(taken.batch, drain)

    def _drain(self, conn: Connection, drain: _Drain, taken: _Taken) -> list[Receipt | None]:
        try:
            while True:
                try:
                    data = drain.link.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    data = b""
                if not data:
                    drain.eof = True
                    break
                drain.buffer += data
            for message in frames(drain.buffer):
                if message[0] == "store":
                    taken.batch.append(callback_of(message))
                else:
                    drain.others.append(message)
        finally:
            taken.ran.set()
        return store_batch(conn, taken.batch, self.appliance.now_ms(), self.appliance.settings)

    def _observe(self, batch: list[Callback], drain: _Drain) -> None:
        """The metrics of what a unit took from the link (here, not in the writer)."""
        metrics = self.metrics
        for _, name, _, _, _, signed_age_s, *_ in batch:
            if signed_age_s is not None:
                metrics.observe_signed_report_age(name, signed_age_s)
        others, drain.others = drain.others, []
        for message in others:
            if message[0] == "edge":
                self.edge.update(*message[1:])
            elif message[0] == "requests":
                for method, status, seconds in message[1]:
                    metrics.observe_request(ROUTE, method, status, seconds)

    def _answer(self, link: socket.socket, batch: list[Callback],
                future: Future[list[Receipt | None]] | None) -> None:
        """Tell the intake how its callbacks fared as soon as the commit is done (in
        the writer's thread: one short send), then write their log lines (a thread of
        their own would cost more in waking it than the lines do)."""
        failed = future is None or future.exception() is not None
        receipts: list[Receipt | None] = (
            [None] * len(batch) if failed or future is None else future.result())
        outcomes = [(ident, receipt is not None)
                    for (ident, *_), receipt in zip(batch, receipts, strict=True)]
        with contextlib.suppress(OSError):
            link.sendall(frame(("stored", outcomes)))
        if failed:
            why = "the writer is stopped" if future is None else future.exception()
            log.error("%d callback(s) could not be stored: %s", len(batch), why)
            return
        for (_, name, *_), receipt in zip(batch, receipts, strict=True):
            if receipt is not None:
                note_receipt(name, receipt)

    def forward_stop(self) -> None:
        """A stop signal: the child stops taking callbacks and finishes its requests."""
        self._stopping.set()
        if self._process is not None:
            _terminate(self._process)

    async def stop(self) -> None:
        """Wait for the child to finish (its requests' writes go through the writer,
        which is still running), then stop the link's threads."""
        self._stopping.set()
        process = self._process
        if process is not None:
            _terminate(process)
            await anyio.to_thread.run_sync(self._join, process)
        if self._supervisor is not None:
            await anyio.to_thread.run_sync(self._supervisor.join, 5.0)

    def _join(self, process: Any) -> None:
        process.join(self.appliance.settings.shutdown_timeout_s)
        if process.is_alive():
            log.warning("report intake did not stop in time; killing it")
            process.kill()
            process.join(2.0)


def _terminate(process: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        if process.pid is not None and process.is_alive():
            os.kill(process.pid, signal.SIGTERM)


def install(runtime: Runtime, metrics: Metrics, listening: socket.socket,
            log_file: Path | None, secrets: list[str]) -> ReportIntake:
    """The report intake, started with the server (:meth:`ReportIntake.start`) and
    stopped before its writer."""
    intake = ReportIntake(runtime, metrics, listening, log_file, secrets)
    runtime.on_stop(intake.stop)
    return intake
