"""The import worker: a scheduler loop that advances jobs one chunk at a time.

Each step takes the oldest unfinished job, parses the next ~2,000 lines of its
stored payload off the event loop, and hands the writer one unit that writes the
contacts, the rejects and the new position together (IMP-4). Killed anywhere, the
job resumes from the last committed position on the next start (IMP-9).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

import anyio.to_thread

from appliance.imports.chunk import parse_chunk
from appliance.imports.import_job import (
    Chunk,
    ImportJob,
    JobMoved,
    apply_chunk,
    fail_job,
    load_payload,
    next_runnable,
)
from appliance.imports.lines import PayloadEncodingError, decode_payload
from appliance.service import Appliance

log = logging.getLogger("appliance.imports")
LOOP = "imports"


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
    def __init__(self, appliance: Appliance, cache_size: int = 4) -> None:
        self.appliance = appliance
        self.rate = ImportRate()
        self._texts: OrderedDict[int, str] = OrderedDict()
        self._prefetched: dict[int, Chunk] = {}  # job id -> its next chunk, parsed ahead
        self._cache_size = cache_size

    def _text(self, job: ImportJob) -> str | None:
        text = self._texts.get(job.id)
        if text is None:
            payload = self.appliance.store.readers.call(lambda c: load_payload(c, job.id))
            if payload is None:
                return None
            text = decode_payload(payload)
            self._texts[job.id] = text
            while len(self._texts) > self._cache_size:
                self._texts.popitem(last=False)
        return text

    async def step(self) -> float | None:
        """Advance one job by one chunk; 0 when more work is waiting."""
        store = self.appliance.store
        job = await store.readers.run(next_runnable)
        if job is None:
            self._texts.clear()
            return None
        started = time.perf_counter()
        try:
            text = await anyio.to_thread.run_sync(self._text, job)
        except PayloadEncodingError as exc:
            error = str(exc)
            await store.writer.run(lambda c: fail_job(c, job.id, error, self.appliance.now_ms()))
            return 0
        if text is None:
            await store.writer.run(lambda c: fail_job(
                c, job.id, "the stored payload is gone (pruned before the job finished)",
                self.appliance.now_ms()))
            return 0
        region, chunk_lines = job.region, self.appliance.settings.imports.chunk_lines

        def parse(line: int, offset: int, entries_seen: int) -> Chunk:
            return parse_chunk(job.id, text, line, offset, chunk_lines, region, entries_seen)

        chunk = self._prefetched.pop(job.id, None)
        if chunk is None or chunk.from_processed != job.processed:
            chunk = await anyio.to_thread.run_sync(
                parse, job.processed, job.text_offset, job.entries_seen)
        self._prefetched.clear()
        if chunk.to_processed < job.total and chunk.to_processed == job.processed:
            await store.writer.run(lambda c: fail_job(
                c, job.id, f"payload has {job.processed} lines, job expected {job.total}",
                self.appliance.now_ms()))
            return 0
        # Parse the next chunk while the writer commits this one (the fsync is a wait).
        applying = asyncio.wrap_future(store.writer.submit(
            lambda c: apply_chunk(c, chunk, self.appliance.now_ms())))
        if chunk.to_processed < job.total:
            seen = job.entries_seen + len(chunk.rows)
            following = await anyio.to_thread.run_sync(
                parse, chunk.to_processed, chunk.to_offset, seen)
            self._prefetched[job.id] = following
        try:
            done = await applying
        except JobMoved as exc:
            log.info("chunk dropped: %s", exc)
            self._texts.pop(job.id, None)
            self._prefetched.clear()
            return 0
        self.rate.add(chunk.to_processed - chunk.from_processed, time.perf_counter() - started)
        if done.state != "RUNNING":
            self._texts.pop(job.id, None)
            log.info("import job %s %s: %s inserted, %s duplicates, %s rejected",
                     done.id, done.state, done.inserted, done.duplicates, done.rejected)
        return 0


def install(appliance: Appliance) -> None:
    worker = ImportWorker(appliance)
    appliance.import_worker = worker
    appliance.scheduler.add(LOOP, worker.step, interval_s=1.0)
