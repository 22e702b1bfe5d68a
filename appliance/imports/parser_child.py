"""What an import parser process runs, and all it imports.

A parser process is started with ``multiprocessing``'s ``spawn``: a new interpreter
that imports the module of its target and nothing else of the parent's. This module is
that target's, so it imports only what parsing needs (the line and number parsers,
phonenumbers, the windows) and the store's read of one payload: ``apsw`` for SQLite,
``psycopg`` only for a ``postgresql://`` URL. Not the web stack, the runtime, the
writer or anyio: each of those would be loaded again in every parser, for nothing
(``tests/imports/test_parser_memory.py`` checks what this module pulls in).

Why ``spawn`` and not ``fork`` or ``forkserver``: the server has threads (the writer,
the readers, the event loop), so a fork of it may copy a lock held by another thread;
and a forked child's RSS counts every page of the server's heap it inherited. A fork
server would share the parsing modules between the parsers, but it is one process
more, and CPython writes to the objects it uses (their reference counts), so the
pages it shares are copied back into each child as soon as the child parses: measured,
the tree came out no smaller (``docs/architecture.md``, "Imports").

The child reads its job's payload a piece at a time
(:class:`appliance.imports.payload_stream.StreamedText`), so what it holds is the
modules, one window's text and that window's outcome, whatever the payload's size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from appliance import heap
from appliance.imports.lines import PayloadEncodingError
from appliance.imports.payload_stream import (
    PayloadVanished,
    ReadPiece,
    StreamedText,
    check_payload,
)
from appliance.imports.windows import PayloadGone, Request, parts_of

STOP = "stop"  # sent to a child: drop the current request
FORGET = "forget"  # sent to a child: drop the current request and the job it keeps
NICENESS = 10  # added to a child's nice value
# The parser's own page cache: it reads each payload page once, in order.
CACHE_KB = 512

# A job's payload, opened: (read(offset, size), size, close()).
Opened = tuple[ReadPiece, int, Callable[[], None]]


def _open_sqlite(path: str, job_id: int) -> Opened | None:
    """The payload's blob, read with incremental blob I/O, each piece in a read
    transaction of its own (no snapshot held between pieces: the writer's checkpoint
    is never kept waiting by a parser)."""
    import apsw

    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    conn.execute(f"PRAGMA cache_size=-{CACHE_KB}")

    def blob() -> Any:
        try:
            return conn.blob_open("main", "import_payloads", "body", job_id, False)
        except apsw.SQLError:  # no such rowid: pruned or deleted
            return None

    first = blob()
    if first is None:
        conn.close()
        return None
    with first:
        size = int(first.length())

    def read(offset: int, count: int) -> bytes | None:
        handle = blob()
        if handle is None:
            return None
        with handle:
            handle.seek(offset)
            return bytes(handle.read(count))

    return read, size, conn.close


def _open_postgresql(url: str, job_id: int) -> Opened | None:
    """The payload read with ``substring`` a piece at a time, each query on its own."""
    from appliance.store.pg import PgConnection

    pg = PgConnection.connect(url, application_name="appliance-import-parser")
    row = pg.execute("SELECT octet_length(body) FROM import_payloads WHERE job_id = ?",
                     (job_id,)).fetchone()
    if row is None:
        pg.close()
        return None

    def read(offset: int, count: int) -> bytes | None:
        got = pg.execute("SELECT substring(body FROM CAST(? AS integer) FOR CAST(? AS integer))"
                         " FROM import_payloads WHERE job_id = ?",
                         (offset + 1, count, job_id)).fetchone()
        return None if got is None else bytes(got[0])

    return read, int(row[0]), pg.close


def open_payload(db: str, job_id: int) -> Opened | None:
    """The job's payload in the SQLite file at ``db`` or, for a ``postgresql://`` URL,
    in that database; None when it is not there."""
    if db.startswith(("postgresql://", "postgres://")):
        return _open_postgresql(db, job_id)
    return _open_sqlite(db, job_id)


class _Job:
    """The job a child parses: its payload opened, and the text read so far."""

    def __init__(self, job_id: int, opened: Opened) -> None:
        self.job_id = job_id
        read, size, self.close = opened
        try:
            check_payload(read, size)  # a payload that is not text fails before any part
            self.text = StreamedText(read, size)
        except BaseException:
            self.close()
            raise


def child(commands: Connection, results: Connection, db: str) -> None:
    """The child's loop: parse what it is asked to, until the server goes away.

    It runs at a lower priority (``nice`` +:data:`NICENESS`): on a busy machine the
    server's event loop and writer come first, so an import never slows the API or the
    report intake for long; on an idle one the parsers still have the cores."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICENESS)
    job: list[_Job] = []  # the one job it keeps (a list: _serve replaces it)
    try:
        while True:
            request: Request | str | None = commands.recv()
            if request is None:
                return
            if request == STOP:  # the job was cancelled or moved: wait for the next one
                continue
            if request == FORGET:  # no job to parse: give its memory back
                _drop(job)
                continue
            assert isinstance(request, Request)
            _serve(request, job, db, commands, results)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return  # the server stopped (or was killed): nothing of ours to finish
    finally:
        _drop(job)


def _drop(job: list[_Job]) -> None:
    if job:
        job.pop().close()
        heap.give_back()


def _serve(request: Request, job: list[_Job], db: str, commands: Connection,
           results: Connection) -> None:
    """Send the request's parts, its job's payload opened first unless it is the job
    kept."""
    try:
        if not job or job[0].job_id != request.job_id:
            _drop(job)
            opened = open_payload(db, request.job_id)
            if opened is None:
                results.send((request.number, PayloadGone()))
                return
            job.append(_Job(request.job_id, opened))
        # Once a window's parts are sent, its numbers are gone: so is their heap.
        for part in parts_of(request, job[0].text, between_windows=heap.give_back):
            if commands.poll():  # a new request (or the end) supersedes this one
                return
            results.send((request.number, part))
    except PayloadEncodingError as exc:
        _drop(job)
        results.send((request.number, exc))
    except PayloadVanished:
        _drop(job)
        results.send((request.number, PayloadGone()))
