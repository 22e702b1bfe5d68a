"""The in-process scheduler: named loops that do small units of work.

Each loop is an async function that does one bounded step and returns how long to
wait before the next (``None``: its interval). :meth:`Scheduler.add` returns the
loop's :class:`Wake` handle: whoever makes work due for the loop calls it to end the
loop's wait at once. There is no waking by name, so a misspelt loop cannot be woken
in vain: a handle exists only for a loop that was added. A loop that raises is
logged (a storage error, as on a full disk, summed up every 10 s rather than a
traceback each step) and retried after its interval; stopping lets the step in progress finish.
``heartbeats`` tells health checks that the loops are alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from appliance.disk import is_storage_error
from appliance.logs import sampled_line

log = logging.getLogger("appliance.scheduler")

Step = Callable[[], Awaitable[float | None]]


@dataclass
class _Loop:
    name: str
    step: Step
    interval_s: float
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    last_run: float = 0.0
    last_error: str | None = None
    runs: int = 0
    errors: int = 0
    step_started: float | None = None  # monotonic time the running step began


class Wake:
    """The handle that wakes one loop (``wake()``); made by :meth:`Scheduler.add`."""

    __slots__ = ("_loop",)

    def __init__(self, loop: _Loop) -> None:
        self._loop = loop

    @property
    def name(self) -> str:
        return self._loop.name

    def __call__(self) -> None:
        self._loop.wake.set()


def log_failure(logger: logging.Logger, what: str, key: str, exc: Exception) -> str:
    """Log that ``what`` failed with ``exc`` (a storage error, as each step on a full
    disk is, summed up every 10 s under ``key``; any other with its traceback) and
    return the error as one line."""
    error = f"{type(exc).__name__}: {exc}"
    if is_storage_error(exc):
        sampled_line(logger, f"{what} failed", level=logging.ERROR).note(key, error)
    else:
        logger.error("%s failed", what, exc_info=exc)
    return error


class Scheduler:
    def __init__(self) -> None:
        self._loops: dict[str, _Loop] = {}
        self._stopping = False

    def add(self, name: str, step: Step, interval_s: float) -> Wake:
        """Register loop ``name``; returns the handle that wakes it."""
        if name in self._loops:
            raise ValueError(f"loop {name!r} already added")
        loop = self._loops[name] = _Loop(name, step, interval_s)
        return Wake(loop)

    @property
    def stopping(self) -> bool:
        """True once a stop began: a long step should end at its next boundary."""
        return self._stopping

    def request_stop(self) -> None:
        """Begin the stop (a signal came): every loop ends after the step it is in;
        :meth:`stop` then waits for them."""
        self._stopping = True

    def start(self) -> None:
        self._stopping = False
        for loop in self._loops.values():
            loop.last_run = time.monotonic()
            loop.task = asyncio.create_task(self._run(loop), name=f"loop:{loop.name}")

    async def stop(self, timeout: float = 15.0) -> None:
        """Let each loop finish its current step, then end them."""
        self._stopping = True
        for loop in self._loops.values():
            loop.wake.set()
        tasks = [lp.task for lp in self._loops.values() if lp.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)

    async def _run(self, loop: _Loop) -> None:
        while not self._stopping:
            delay: float | None = loop.interval_s
            loop.step_started = time.monotonic()
            try:
                delay = await loop.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing step must not end the loop
                loop.errors += 1
                loop.last_error = log_failure(log, f"loop {loop.name}", loop.name, exc)
                delay = loop.interval_s
            loop.step_started = None
            loop.runs += 1
            loop.last_run = time.monotonic()
            if self._stopping:
                break
            wait_s = loop.interval_s if delay is None else delay
            if wait_s <= 0:
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(loop.wake.wait(), timeout=wait_s)
            loop.wake.clear()

    def heartbeats(self) -> dict[str, float]:
        """Seconds since each loop last finished a step."""
        now = time.monotonic()
        return {name: now - lp.last_run for name, lp in self._loops.items()}

    def busy(self) -> dict[str, float]:
        """Seconds each loop has spent in its current step (loops between steps and
        loops whose task ended are left out; see :meth:`ended`)."""
        now = time.monotonic()
        return {name: now - lp.step_started for name, lp in self._loops.items()
                if lp.step_started is not None and lp.task is not None and not lp.task.done()}

    def ended(self) -> list[str]:
        """Loops whose task is over although the scheduler is not stopping."""
        if self._stopping:
            return []
        return [name for name, lp in self._loops.items()
                if lp.task is not None and lp.task.done()]

    def errors(self) -> dict[str, str | None]:
        return {name: lp.last_error for name, lp in self._loops.items()}
