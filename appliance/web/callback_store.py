"""Checked callbacks written together: the write unit of many callbacks at once.

Both ports end here. The report intake's port sends its callbacks over the link and
the server's thread that reads them hands the writer one unit for whatever came
(:mod:`appliance.web.intake_process`); the server's own port queues each callback in
:class:`CallbacksTogether`, which hands the writer one unit for whatever is queued
when it runs. Either way the unit is :func:`store_batch`: the callbacks stored
together by :func:`appliance.reports.together.receive_all` (a few statements for all
of them), or, when that raises, each by the route's own unit under a savepoint of its
own, so the outcome of each is what it would be alone and one that fails costs no
other. A callback is answered only once the commit that holds it is done, so a ``2xx``
still means on disk.

Why together on the own port too: one unit a callback was a savepoint, a handful of
statements and an event-loop wake-up each, and every statement gave the interpreter
lock back to the event loop and waited to take it again; under a report flood the
writer's cycle (15 callbacks in 4.6 ms) was bound by those waits, not by the disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from appliance.config import Settings
from appliance.inbound.store import InboundRules
from appliance.providers import InboundMessage
from appliance.reports.apply import Receipt
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.reports.together import receive_all
from appliance.store.connection import Connection
from appliance.store.errors import STORAGE_ERRORS
from appliance.store.writer import Writer
from appliance.web.callback_check import Checked, note_inbound, receive_push

log = logging.getLogger("appliance.callbacks")
# A checked callback as the write unit takes it: (number, provider, raw, reports,
# parse_error, signed_age_s, inbound, inbound_error): the last two, inbound messages
# pushed to the report URL (``Checked.inbound``). The number is the caller's own.
Callback = tuple[int, str, RawCallback, list[InboxReport], str | None, float | None,
                 list[InboundMessage], str | None]


def as_callback(number: int, checked: Checked) -> Callback:
    return (number, checked.provider, checked.raw, checked.reports, checked.parse_error,
            checked.signed_age_s, checked.inbound, checked.inbound_error)


def store_batch(conn: Connection, batch: list[Callback], now_ms: int,
                settings: Settings) -> list[Receipt | None]:
    """The write unit of a batch of callbacks: each the route's own unit
    (:func:`~appliance.web.callback_check.receive_push`) under a savepoint of its own,
    so one that fails is undone alone (``None``); a storage error fails them all.

    Callbacks of reports alone (no inbound messages) are first stored together
    (:func:`~appliance.reports.together.receive_all`: a few statements for all of them,
    not a few each, which on PostgreSQL are as many round trips); when that raises, it
    is undone and they are taken one by one as above, so the outcome of each is the
    same either way."""
    if not any(inbound or inbound_error is not None for *_, inbound, inbound_error in batch):
        together = _store_together(conn, batch, now_ms)
        if together is not None:
            return together
    receipts: list[Receipt | None] = []
    for _, name, raw, reports, parse_error, _, inbound, inbound_error in batch:
        conn.execute("SAVEPOINT intake")
        try:
            carries_inbound = bool(inbound) or inbound_error is not None
            rules = InboundRules.from_settings(settings) if carries_inbound else None
            receipt, filed = receive_push(conn, rules, raw, reports, parse_error, inbound,
                                          inbound_error, now_ms)
            receipts.append(receipt)
            note_inbound(name, filed)
        except STORAGE_ERRORS:
            raise
        except Exception:
            log.exception("callback for provider %s could not be stored", raw.provider)
            conn.execute("ROLLBACK TO intake")
            receipts.append(None)
        conn.execute("RELEASE intake")
    return receipts


def _store_together(conn: Connection, batch: list[Callback], now_ms: int
                    ) -> list[Receipt | None] | None:
    """The batch's callbacks by :func:`~appliance.reports.together.receive_all`, under one
    savepoint; ``None`` (nothing stored) when one of them raised."""
    conn.execute("SAVEPOINT intake_all")
    try:
        receipts = receive_all(conn, [(raw, reports, parse_error)
                                      for _, _, raw, reports, parse_error, *_ in batch], now_ms)
    except STORAGE_ERRORS:
        raise
    except Exception:
        conn.execute("ROLLBACK TO intake_all")
        conn.execute("RELEASE intake_all")
        return None
    conn.execute("RELEASE intake_all")
    return list(receipts)


Waiter = asyncio.Future[Receipt | None]


class CallbacksTogether:
    """The own port's callbacks, each queued here and stored with those queued beside it.

    :meth:`store` queues a callback and, when no unit is on its way to the writer, sends
    one; the unit takes every callback queued by the time the writer runs it (those
    that come while the writer commits wait for the next), stores them with
    :func:`store_batch` and, once committed, each caller gets its receipt (``None``:
    that callback failed alone and was undone) or the batch's exception (a storage
    error, the writer stopped). Used from one event loop; the unit runs in the
    writer's thread, which only takes from the queue.
    """

    def __init__(self, writer: Writer[Any], settings: Settings,
                 now_ms: Callable[[], int]) -> None:
        self.writer = writer
        self.settings = settings
        self.now_ms = now_ms
        self._queue: deque[tuple[Callback, Waiter]] = deque()
        self._sent = False  # a unit is on its way and has not taken the queue yet
        self._tasks: set[asyncio.Task[None]] = set()
        self._serial = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def store(self, checked: Checked) -> Receipt | None:
        # The loop kept while it runs: asking for the running loop costs a system call a
        # callback on Python 3.11 (it checks the process id); a loop that stopped is
        # asked for again.
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        waiter: Waiter = loop.create_future()
        self._serial += 1
        self._queue.append((as_callback(self._serial, checked), waiter))
        if not self._sent:
            self._sent = True
            task = loop.create_task(self._write())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await waiter

    def _take(self) -> list[tuple[Callback, Waiter]]:
        """Everything queued now (the flag first: a callback queued after it sends a
        unit of its own)."""
        self._sent = False
        taken: list[tuple[Callback, Waiter]] = []
        while True:
            try:
                taken.append(self._queue.popleft())
            except IndexError:
                return taken

    async def _write(self) -> None:
        taken: list[tuple[Callback, Waiter]] = []
        ran = False

        def unit(conn: Connection) -> list[Receipt | None]:
            nonlocal ran
            ran = True
            taken.extend(self._take())
            return store_batch(conn, [callback for callback, _ in taken], self.now_ms(),
                               self.settings)

        try:
            receipts = await self.writer.run(unit)
        except BaseException as exc:
            if not ran:  # the writer never ran it: what it was sent for is still queued
                taken.extend(self._take())
            failure = exc if isinstance(exc, Exception) else RuntimeError("stopped")
            for _, waiter in taken:
                if not waiter.done():
                    waiter.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, waiter), receipt in zip(taken, receipts, strict=True):
            if not waiter.done():
                waiter.set_result(receipt)
