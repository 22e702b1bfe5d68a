"""The webhook delivery loop (OPS-5): each event POSTed, signed, until a ``2xx``.

A scheduler loop takes the heads that are due (the oldest undelivered event of each
message, :mod:`appliance.webhooks.outbox`) and POSTs them, at most ``[webhooks]
concurrency`` at once, each to its own message: a message's next event becomes due only
in the unit that records this one's ``2xx``, so a receiver never gets event n+1 of a
message before event n was taken. An event is marked delivered only after its ``2xx``
and in a write unit of its own; a crash between the two sends it again (at least once:
the receiver dedupes on ``event_id``).

Failures back off twice over, both on the reconciler's ladder
(:data:`appliance.reports.inbox.BACKOFF_S`: 1 s, 5 s, 15 s, 1 min, 5 min, 30 min, 2 h,
6 h, then every 6 h): the event that failed waits for its next step, and so does the
receiver as a whole, by its failures since the last ``2xx`` (no POST before the pause
is over, then one at a time until one is taken). A receiver that is down for hours so
gets a handful of POSTs, not one per waiting event, and when it answers again every
message goes on at once. Every answer but a ``2xx`` is a failure, ``410 Gone``
included: events are never dropped; the console and the ``outbox_stale`` alert say
that they wait, and why.

When an event's outcome cannot be written (a full disk, a database that refuses the
unit), the event stays its message's head in the database, and nothing there says to
wait. So the loop keeps its own hold, in memory, on the same ladder by the times in a
row its outcome could not be recorded: the event is not POSTed again before its next
step (1 s, 5 s, 15 s, 1 min, ...), at most 4 POSTs of one event in a minute whatever
the disk does, instead of one POST after another as fast as the receiver answers. A
unit that only met another process's work (a deadlock between two processes' writers on
PostgreSQL) is written again at once, a few times, before that hold: the receiver has
the event, and an unrecorded ``2xx`` is a second POST.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial

import httpx

from appliance.outgoing_http import async_client
from appliance.reports.inbox import next_delay_ms
from appliance.runtime import Runtime
from appliance.store.errors import StoreConflict
from appliance.webhooks import outbox
from appliance.webhooks.outbox import Event, Gate
from appliance.webhooks.signature import HEADER, sign

log = logging.getLogger("appliance.webhooks")
LOOP = "webhooks"
POLL_S = 0.5  # how soon a new event (written by a trigger) is seen
STOP_WAIT_S = 5.0  # at shutdown, POSTs in flight get this long (else: sent again later)
# A delivered event's unit that met another process's work is written again after these.
CONFLICT_PAUSES_S = (0.05, 0.2, 0.5, 1.0, 2.0)


class WebhookDelivery:
    """The loop's state: POSTs in flight, and the receiver's backoff."""

    def __init__(self, appliance: Runtime, gate: Gate) -> None:
        self.appliance = appliance
        self.settings = appliance.settings.webhooks
        self.gate = gate
        self.wake = appliance.scheduler.add(LOOP, appliance.singleton(LOOP, self.step),
                                            interval_s=POLL_S)
        self.inflight: dict[int, asyncio.Task[None]] = {}
        # Events whose outcome was committed while the due heads were being read: that
        # read may predate the commit, so they are not taken from it.
        self._finished: set[int] = set()
        # Events whose outcome could not be recorded: (times in a row, not before).
        self._unrecorded: dict[int, tuple[int, int]] = {}
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            n = self.settings.concurrency
            self._client = async_client(
                timeout=self.settings.timeout_s,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        return self._client

    def slots(self, now_ms: int) -> int:
        """How many more POSTs may start now."""
        if now_ms < self.gate.paused_until:
            return 0
        allowed = 1 if self.gate.failures else self.settings.concurrency
        return allowed - len(self.inflight)

    async def step(self) -> float | None:
        now = self.appliance.now_ms()
        free = self.slots(now)
        if free <= 0:
            if now < self.gate.paused_until:
                return min(POLL_S, (self.gate.paused_until - now) / 1000)
            return POLL_S  # a POST that ends wakes the loop
        self._finished.clear()
        held = {i for i, (_, until) in self._unrecorded.items() if until > now}
        wanted = free + len(self.inflight) + len(held)
        due, later = await self.appliance.store.readers.run(
            lambda c: outbox.due_events(c, now, wanted))
        skip = self.inflight.keys() | self._finished | held
        fresh = [e for e in due if e.id not in skip][:free]
        for event in fresh:
            self.inflight[event.id] = asyncio.create_task(
                self._deliver(event), name=f"webhook:{event.id}")
        if len(fresh) == free or later is None:
            return POLL_S
        return max(0.0, min(POLL_S, (later - now) / 1000))

    async def _deliver(self, event: Event) -> None:
        try:
            error = await self._post(event)
            now = self.appliance.now_ms()
            writer = self.appliance.store.writer
            if error is None:
                if self.gate.failures:
                    log.info("webhook receiver takes events again",
                             extra={"failures": self.gate.failures})
                self.gate = Gate()
                await self._record_delivered(event, now)
                self._unrecorded.pop(event.id, None)
                return
            failures = self.gate.failures + 1
            self.gate = Gate(failures, now + next_delay_ms(failures - 1))
            if failures == 1:
                log.warning("webhook receiver failing: %s", error)
            retry_at = now + next_delay_ms(event.attempts)
            await writer.run(partial(outbox.record_failure, event=event, error=error,
                                     retry_at=retry_at, gate=self.gate, now_ms=now))
            self._unrecorded.pop(event.id, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the event stays the head: it is sent again, later
            times = self._unrecorded.get(event.id, (0, 0))[0] + 1
            wait_ms = next_delay_ms(times - 1)
            self._unrecorded[event.id] = (times, self.appliance.now_ms() + wait_ms)
            if times == 1:
                log.exception("webhook event %s: outcome not recorded; sent again in"
                              " %d s", event.event_id, wait_ms // 1000)
            else:
                log.warning("webhook event %s: outcome not recorded (%d times in a row:"
                            " %s: %s); sent again in %d s", event.event_id, times,
                            type(exc).__name__, exc, wait_ms // 1000)
        finally:
            self.inflight.pop(event.id, None)
            self._finished.add(event.id)
            self.wake()

    async def _record_delivered(self, event: Event, now_ms: int) -> None:
        """Record ``event``'s ``2xx``, tried again at once when the unit only met another
        process's work (:class:`StoreConflict`: a deadlock or a lock wait between two
        processes' writers, which sending it again resolves): the receiver has the event,
        and an outcome left unrecorded would POST it a second time."""
        unit = partial(outbox.mark_delivered, event=event, now_ms=now_ms)
        for pause_s in CONFLICT_PAUSES_S:
            try:
                await self.appliance.store.writer.run(unit)
                return
            except StoreConflict:
                await asyncio.sleep(pause_s)
        await self.appliance.store.writer.run(unit)

    async def _post(self, event: Event) -> str | None:
        """POST ``event``; ``None`` for a ``2xx``, else what went wrong."""
        body = event.body()
        headers = {"Content-Type": "application/json",
                   HEADER: sign(body, self.settings.secret)}
        try:
            response = await self.client().post(self.settings.url, content=body,
                                                 headers=headers)
        except httpx.TimeoutException:
            return f"no answer within {self.settings.timeout_s:g} s"
        except httpx.ConnectError as exc:
            return f"cannot connect: {exc}"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if 200 <= response.status_code < 300:
            return None
        error = f"answered {response.status_code} {response.reason_phrase}".rstrip()
        if response.is_redirect:
            error += " (redirects are not followed: set [webhooks] url to where it points)"
        return error

    def try_now(self) -> None:
        """The operator's *Try now* (after the stored backoff was ended): this process
        forgets its backoff too and the loop looks for due events at once."""
        self.gate = Gate()
        self.wake()

    async def stop(self) -> None:
        """Let the POSTs in flight finish (briefly), then close the connections."""
        tasks = list(self.inflight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=min(STOP_WAIT_S,
                                                               self.settings.timeout_s))
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None


def install(appliance: Runtime) -> WebhookDelivery | None:
    """Turn events on or off as ``[webhooks]`` says, and start delivering when on (the
    delivery, whose loop is registered; ``None`` when off)."""
    settings = appliance.settings.webhooks
    url = settings.url if settings.configured else None
    gate = appliance.store.writer.call(
        partial(outbox.set_receiver, url=url, now_ms=appliance.now_ms()))
    if url is None:
        return None
    # Its loop runs in one process at a time on PostgreSQL: each message's events stay
    # in order and a head event is not posted by two processes at once.
    delivery = WebhookDelivery(appliance, gate)
    appliance.on_stop(delivery.stop)
    return delivery
