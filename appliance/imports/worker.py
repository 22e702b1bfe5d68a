"""The import worker: a scheduler loop that advances jobs part by part.

Each step takes the oldest unfinished job and works on it for up to :data:`STEP_S`: its
lines are parsed ahead in windows (by child processes for a large job,
:mod:`appliance.imports.parse_process`; in a worker thread, a window of one chunk, for
a small one), and each window's outcome comes as parts that the writer commits one unit
each: some of the window's numbers, and with its last part its rejects and the new
position, guarded by where the job is (IMP-4). Up to :data:`IN_FLIGHT` part units wait
for the writer at once, so the writer's group commit puts several in one transaction
when the disk is the slower part. The step ends with every unit it handed over
committed (or refused), so a stop never leaves one behind; once a stop began it ends
after the part it is on. Killed anywhere, the job resumes from the last committed part
on the next start (IMP-9).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from appliance import heap
from appliance.imports.apply_window import apply_parsed
from appliance.imports.import_job import (
    ImportJob,
    JobMoved,
    claim_runnable,
    fail_job,
    next_runnable,
)
from appliance.imports.lines import PayloadEncodingError
from appliance.imports.parse_process import (
    PROCESS_MIN_LINES,
    WINDOW_CHUNKS,
    ChildGone,
    ChildParser,
    LocalParser,
)
from appliance.imports.parser_budget import parser_processes
from appliance.imports.parser_child import Opened, open_payload
from appliance.imports.windows import ParsedChunk, PayloadGone, Request
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.store.connection import Connection

log = logging.getLogger("appliance.imports")
LOOP = "imports"
STEP_S = 0.5  # a step's work, so that a stop waits at most about this long
IN_FLIGHT = 4  # part units handed to the writer and not committed yet


@dataclass
class ImportRate:
    """Rows per second over the last chunks, for metrics and the job page."""

    rows: int = 0
    seconds: float = 0.0
    total_rows: int = 0

    def add(self, rows: int, seconds: float) -> None:
        self.rows += rows
        self.seconds += seconds
        self.total_rows += rows
        if self.seconds > 10:
            self.rows //= 2
            self.seconds /= 2

    @property
    def per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


class ImportWorker:
    def __init__(self, appliance: Runtime) -> None:
        self.appliance = appliance
        self.rate = ImportRate()
        self.local = LocalParser(self._open_payload)
        self.child: ChildParser | None = None
        self.processes = parser_processes(appliance.settings.imports)
        # (job id, next line) the parser is working towards, when it is still going.
        self._streaming: tuple[int, int] | None = None
        self._parser: ChildParser | LocalParser = self.local
        self._job: int | None = None  # the job the parser was last started on
        self._given_back: int | None = None  # the last job after whose accept it gave back
        self._committed = 0

    def _database(self) -> str:
        settings = self.appliance.settings
        return settings.database_url or str(settings.db_path)

    def _open_payload(self, job_id: int) -> Opened | None:
        return open_payload(self._database(), job_id)

    def _small(self, job: ImportJob) -> bool:
        return job.window_to is None and job.total - job.processed < PROCESS_MIN_LINES

    def _parser_for(self, job: ImportJob) -> ChildParser | LocalParser:
        if self._small(job) or self.processes == 0:  # or no memory for a parser process
            return self.local
        if self.child is None:
            self.child = ChildParser(self._database(), self.processes)
        return self.child

    def _start(self, job: ImportJob) -> None:
        if self._streaming == (job.id, job.processed):
            return  # the parser is already on its way from here
        self._parser.stop()
        self._parser, self._job = self._parser_for(job), job.id
        chunk_lines = self.appliance.settings.imports.chunk_lines
        window = chunk_lines
        if not self._small(job):
            # windows enough for each parser to have two (a large job parsed in the
            # thread, for want of memory, is read in windows too: one parser's)
            parsers = self.child.processes if self.child and self._parser is self.child else 1
            share = (job.total - job.processed) // (4 * parsers)
            window = max(chunk_lines, min(chunk_lines * WINDOW_CHUNKS, share))
        self._parser.start(Request(0, job.id, job.region, job.resume_line, job.text_offset,
                                   job.entries_seen, chunk_lines, job.total, window,
                                   job.window_to, job.window_done))
        self._streaming = (job.id, job.processed)

    def _forget(self) -> None:
        self._parser.stop(forget=True)
        if self._job is not None:
            heap.give_back()  # the job's parts, parsed or applied, are gone
        self._streaming = self._job = None

    async def step(self) -> float | None:
        """Advance the oldest unfinished job for up to STEP_S; 0 when more work waits."""
        store = self.appliance.store
        job = await store.readers.run(next_runnable)
        if job is not None and self.appliance.on_postgresql:  # several processes share it
            job = await store.writer.run(claim_runnable)
        if job is None:
            self._forget()
            return None
        started = time.perf_counter()
        self._start(job)
        applying: deque[tuple[ParsedChunk, asyncio.Future[ImportJob]]] = deque()
        # Where the next part must start: its window, the window's numbers in before it.
        window_from, done_before, processed = job.resume_line, job.window_done, job.processed
        self._committed = job.processed
        try:
            while True:
                try:
                    parsed = await self._parser.next()
                except ChildGone:
                    log.warning("an import parser process ended; starting them again")
                    self._streaming = None
                    break
                if isinstance(parsed, PayloadEncodingError | PayloadGone):
                    error = (str(parsed) if isinstance(parsed, PayloadEncodingError)
                             else "the stored payload is gone (pruned before the job finished)")
                    await self._drain(applying)
                    await self._fail(job.id, error)
                    self._forget()
                    return 0
                part = parsed
                if part.from_processed != window_from or part.done_before != done_before:
                    self._streaming = None  # not the part this job needs next
                    break
                if part.last and part.to_processed < job.total and part.to_processed == window_from:
                    await self._drain(applying)
                    await self._fail(job.id,
                                     f"payload has {window_from} lines, job expected {job.total}")
                    self._forget()
                    return 0
                applying.append((part, asyncio.wrap_future(store.writer.submit(
                    self._applying(part), bulk=True))))
                if part.last:
                    window_from, done_before, processed = part.to_processed, 0, part.to_processed
                else:
                    done_before += len(part.contacts)
                    processed += len(part.contacts) + sum(part.repeats)
                self._streaming = (job.id, processed)
                while len(applying) >= IN_FLIGHT:
                    await self._settle(applying.popleft())
                if ((part.last and window_from >= job.total)
                        or time.perf_counter() - started > STEP_S
                        or self.appliance.scheduler.stopping):
                    break
        except JobMoved as exc:  # cancelled, or moved by someone else: start over from the store
            log.info("chunk dropped: %s", exc)
            self._forget()
        finally:
            moved = await self._drain(applying)
            self.rate.add(self._committed - job.processed, time.perf_counter() - started)
        if self._committed > job.processed and self._given_back != job.id:
            # Parts of the job are in: the accept that stored its payload has long
            # returned, so the pieces it held are free. Give their heap back, once a job.
            heap.give_back()
            self._given_back = job.id
        if moved or window_from >= job.total:
            self._forget()
        return 0

    def _applying(self, part: ParsedChunk) -> Callable[[Connection], ImportJob]:
        return lambda c: apply_parsed(c, part, self.appliance.now_ms())

    async def _fail(self, job_id: int, error: str) -> None:
        await self.appliance.store.writer.run(
            lambda c: fail_job(c, job_id, error, self.appliance.now_ms()))

    async def _settle(self, item: tuple[ParsedChunk, asyncio.Future[ImportJob]]) -> None:
        _chunk, future = item
        done = await future
        self._committed = done.processed
        if done.state != "RUNNING":
            log.info("import job %s %s: %s inserted, %s duplicates, %s rejected",
                     done.id, done.state, done.inserted, done.duplicates, done.rejected)

    async def _drain(self, applying: deque[tuple[ParsedChunk, asyncio.Future[ImportJob]]]
                     ) -> bool:
        """Wait for every chunk unit handed over; True if one found the job moved."""
        moved = False
        while applying:
            item = applying.popleft()
            try:
                await self._settle(item)
            except JobMoved as exc:
                log.info("chunk dropped: %s", exc)
                moved = True
        return moved

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None


def install(runtime: Runtime) -> tuple[ImportWorker, Wake]:
    """The import worker and the handle that wakes its loop (a new job, a resume)."""
    worker = ImportWorker(runtime)
    wake = runtime.scheduler.add(LOOP, worker.step, interval_s=1.0)
    runtime.on_close(worker.close)
    return worker, wake
