"""The webhook delivery loop (OPS-5, TEAM-2): each event POSTed, signed, until a ``2xx``.

Every receiver is a lane of its own: the ``[webhooks]`` one while it is configured, and
each account's own (:mod:`appliance.webhooks.receivers`, read again every
:data:`RECEIVERS_S`, so one set while serving is delivered to at once). Each lane has
its own backoff gate, its own connections and its own share of the loop: its due heads
are read by its own index range, so a receiver that is down or slow never holds another
account's events back. An event is POSTed to the URL of its receiver, signed with that
receiver's secret (``[webhooks] secret``, or the account's).

A scheduler loop takes the heads that are due (the oldest undelivered event of each
message, :mod:`appliance.webhooks.outbox`) and POSTs them, at most ``[webhooks]
concurrency`` at once to each receiver, each to its own message: a message's next event
becomes due only in the unit that records this one's ``2xx``, so a receiver never gets
event n+1 of a message before event n was taken. An event is marked delivered only after its ``2xx``
and in a write unit of its own; a crash between the two sends it again (at least once:
the receiver dedupes on ``event_id``).

Failures back off twice over, both on the reconciler's ladder
(:data:`appliance.reports.inbox.BACKOFF_S`: 1 s, 5 s, 15 s, 1 min, 5 min, 30 min, 2 h,
6 h, then every 6 h): the event that failed waits for its next step, and so does its
receiver as a whole, by its failures since the last ``2xx`` (no POST before the pause
is over, then one at a time until one is taken). A receiver that is down for hours so
gets a handful of POSTs, not one per waiting event, and when it answers again every
message goes on at once. Every answer but a ``2xx`` is a failure, ``410 Gone``
included: events are never dropped; the console and the ``outbox_stale`` alert say
that they wait, and why.

When an event's outcome cannot be written (a full disk, a database that refuses the
unit), the event stays its message's head in the database, and nothing there says to
wait. So the loop keeps its own hold, in memory, per event (so for every receiver's
events alike), on the same ladder by the times in a row its outcome could not be
recorded: the event is not POSTed again before its next
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
import time
from dataclasses import dataclass, field
from functools import partial

import httpx

from appliance.outgoing_http import async_client
from appliance.reports.inbox import next_delay_ms
from appliance.runtime import Runtime
from appliance.store.connection import Connection
from appliance.store.errors import StoreConflict
from appliance.webhooks import outbox
from appliance.webhooks.events import DEFAULT_RECEIVER
from appliance.webhooks.outbox import Event, Gate
from appliance.webhooks.receivers import Receiver, account_receivers
from appliance.webhooks.signature import HEADER, sign

log = logging.getLogger("appliance.webhooks")
LOOP = "webhooks"
POLL_S = 0.5  # how soon a new event (written by a trigger) is seen
RECEIVERS_S = 1.0  # how soon an account's receiver, set or changed while serving, is seen
STOP_WAIT_S = 5.0  # at shutdown, POSTs in flight get this long (else: sent again later)
# A delivered event's unit that met another process's work is written again after these.
CONFLICT_PAUSES_S = (0.05, 0.2, 0.5, 1.0, 2.0)


@dataclass
class Lane:
    """One receiver as the loop sees it: where it is, its backoff, its POSTs in flight
    (event ids) and its connections."""

    receiver: Receiver
    gate: Gate
    inflight: set[int] = field(default_factory=set)
    client: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        key = self.receiver.key
        return "[webhooks]" if key == DEFAULT_RECEIVER else f"account {key}'s"


def _stored(conn: Connection) -> list[tuple[Receiver, Gate]]:
    """Every account's receiver with its stored backoff (a read unit)."""
    return [(r, outbox.stored_gate(conn, r.key)) for r in account_receivers(conn)]


class WebhookDelivery:
    """The loop's state: each receiver's lane, and the POSTs in flight."""

    def __init__(self, appliance: Runtime, gate: Gate) -> None:
        self.appliance = appliance
        self.settings = appliance.settings.webhooks
        self.lanes: dict[int, Lane] = {}
        if self.settings.configured:
            default = Receiver(DEFAULT_RECEIVER, self.settings.url, self.settings.secret)
            self.lanes[DEFAULT_RECEIVER] = Lane(default, gate)
        self._read_at = float("-inf")  # when the accounts' receivers were last read
        self.wake = appliance.scheduler.add(LOOP, appliance.singleton(LOOP, self.step),
                                            interval_s=POLL_S)
        self.inflight: dict[int, asyncio.Task[None]] = {}
        # Events whose outcome was committed while the due heads were being read: that
        # read may predate the commit, so they are not taken from it.
        self._finished: set[int] = set()
        # Events whose outcome could not be recorded: (times in a row, not before).
        self._unrecorded: dict[int, tuple[int, int]] = {}
        self._closing: list[httpx.AsyncClient] = []

    @property
    def gate(self) -> Gate:
        """The ``[webhooks]`` receiver's backoff."""
        lane = self.lanes.get(DEFAULT_RECEIVER)
        return Gate() if lane is None else lane.gate

    async def _read_receivers(self) -> None:
        """The accounts' receivers as stored now: new ones get a lane (with their stored
        backoff), a changed URL a new lane, a removed one loses its lane."""
        if time.monotonic() - self._read_at < RECEIVERS_S:
            return
        stored = await self.appliance.store.readers.run(_stored)
        self._read_at = time.monotonic()
        seen = {DEFAULT_RECEIVER}
        for receiver, gate in stored:
            seen.add(receiver.key)
            lane = self.lanes.get(receiver.key)
            if lane is None or lane.receiver.url != receiver.url:
                if lane is not None and lane.client is not None:
                    self._closing.append(lane.client)
                self.lanes[receiver.key] = Lane(receiver, gate)
            elif lane.receiver != receiver:  # a new secret: the next POST signs with it
                lane.receiver = receiver
        for key in set(self.lanes) - seen:
            lane = self.lanes.pop(key)
            if lane.client is not None:
                self._closing.append(lane.client)

    def client(self, lane: Lane) -> httpx.AsyncClient:
        if lane.client is None:
            n = self.settings.concurrency
            lane.client = async_client(
                timeout=self.settings.timeout_s,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        return lane.client

    def slots(self, lane: Lane, now_ms: int) -> int:
        """How many more POSTs to ``lane``'s receiver may start now."""
        if now_ms < lane.gate.paused_until:
            return 0
        allowed = 1 if lane.gate.failures else self.settings.concurrency
        return allowed - len(lane.inflight)

    async def step(self) -> float | None:
        await self._read_receivers()
        now = self.appliance.now_ms()
        wait_s = POLL_S
        self._finished.clear()
        held = {i for i, (_, until) in self._unrecorded.items() if until > now}
        plan: dict[int, tuple[int, int]] = {}  # receiver -> (free slots, heads wanted)
        for key, lane in self.lanes.items():
            free = self.slots(lane, now)
            if free > 0:
                plan[key] = (free, free + len(lane.inflight) + len(held))
            elif now < lane.gate.paused_until:
                wait_s = min(wait_s, (lane.gate.paused_until - now) / 1000)
        if not plan:
            return wait_s  # a POST that ends wakes the loop

        def read(c: Connection) -> dict[int, tuple[list[Event], int | None]]:
            return {key: outbox.due_events(c, now, wanted, key)
                    for key, (_, wanted) in plan.items()}

        due = await self.appliance.store.readers.run(read)
        skip = self.inflight.keys() | self._finished | held
        for key, (events, later) in due.items():
            lane, free = self.lanes[key], plan[key][0]
            fresh = [e for e in events if e.id not in skip][:free]
            for event in fresh:
                lane.inflight.add(event.id)
                self.inflight[event.id] = asyncio.create_task(
                    self._deliver(event, lane), name=f"webhook:{event.id}")
            if len(fresh) < free and later is not None:
                wait_s = min(wait_s, (later - now) / 1000)
        return max(0.0, wait_s)

    async def _deliver(self, event: Event, lane: Lane) -> None:
        try:
            error = await self._post(event, lane)
            now = self.appliance.now_ms()
            writer = self.appliance.store.writer
            if error is None:
                if lane.gate.failures:
                    log.info("webhook receiver takes events again",
                             extra={"failures": lane.gate.failures, "receiver": lane.name})
                lane.gate = Gate()
                await self._record_delivered(event, now)
                self._unrecorded.pop(event.id, None)
                return
            failures = lane.gate.failures + 1
            lane.gate = Gate(failures, now + next_delay_ms(failures - 1))
            if failures == 1:
                log.warning("%s webhook receiver failing: %s", lane.name, error)
            retry_at = now + next_delay_ms(event.attempts)
            await writer.run(partial(outbox.record_failure, event=event, error=error,
                                     retry_at=retry_at, gate=lane.gate, now_ms=now))
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
            lane.inflight.discard(event.id)
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

    async def _post(self, event: Event, lane: Lane) -> str | None:
        """POST ``event`` to ``lane``'s receiver, signed with its secret; ``None`` for a
        ``2xx``, else what went wrong."""
        body = event.body()
        receiver = lane.receiver
        headers = {"Content-Type": "application/json", HEADER: sign(body, receiver.secret)}
        try:
            response = await self.client(lane).post(receiver.url, content=body,
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
            error += " (redirects are not followed: set the receiver's url to where it points)"
        return error

    def try_now(self, receiver: int = DEFAULT_RECEIVER) -> None:
        """The operator's *Try now* (after the stored backoff was ended): this process
        forgets that receiver's backoff too and the loop looks for due events at once."""
        lane = self.lanes.get(receiver)
        if lane is not None:
            lane.gate = Gate()
        self._read_at = float("-inf")  # a receiver just set is looked for too
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
        clients = [*self._closing, *(lane.client for lane in self.lanes.values())]
        self._closing = []
        for lane in self.lanes.values():
            lane.client = None
        for client in clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()


def install(appliance: Runtime) -> WebhookDelivery:
    """Turn the ``[webhooks]`` receiver on or off as it says, and start delivering (the
    delivery, whose loop is registered): to it when on, and to every account's own
    receiver, those set while serving included."""
    settings = appliance.settings.webhooks
    url = settings.url if settings.configured else None
    gate = appliance.store.writer.call(
        partial(outbox.set_receiver, url=url, now_ms=appliance.now_ms()))
    # Its loop runs in one process at a time on PostgreSQL: each message's events stay
    # in order and a head event is not posted by two processes at once.
    delivery = WebhookDelivery(appliance, gate)
    appliance.on_stop(delivery.stop)
    return delivery
