"""The sender (DLR-8, OPS-1, OPS-6): claim due messages, submit them, record each outcome.

One scheduler loop, ``sender``, keeps for each configured provider a *lane*: an
in-memory queue of reserved messages (high priority first) and ``concurrency``
workers. Each step it reserves more due messages when fewer than a batch (about one
second of the provider's rate, at most ``[sending] batch_size``) are waiting, and it
always takes any high-priority message that is due, which goes to the head of the
queue (:func:`~appliance.sending.claims.claim_due`: high first, then the campaigns
and normal singles round robin). Reserving leaves the messages ``QUEUED``/``RETRY``:
nothing has been sent.

A worker takes the next message, waits for its token of the provider's rate
(``Transport.reserve``), then has it marked ``SENDING`` and hands it to the transport
at once; when the outcome comes, it is recorded with the reports that arrived early
(DLR-6). Marks and outcomes go to the writer in small units per lane: whatever the
workers have ready while the previous unit commits (at most one per worker), outcomes
before marks, so they share one group commit. A worker has at most one message
``SENDING`` at any commit, so at most ``concurrency`` messages per provider are
``SENDING`` at any moment: those, and only those, may have reached the provider when
the process dies.

At start, before the first claim, reserved messages are given back (never sent) and
messages a crash left in ``SENDING`` become ``UNCERTAIN`` (``RETRY`` where the provider
drops repeats of our ref): nobody can know whether the provider got them, and the
money rule is never to send twice.

A provider that refuses every message until its operator acts (no credit, a header not
registered) holds its lane, in every process, until a retry finds it taking messages
again (:mod:`appliance.sending.held_lanes`); its messages stay queued.

A pause or a cancel is committed by the campaign's own unit; the sender then forgets
what it had reserved of that campaign, and :meth:`Sender.settle_campaign` waits until
none of its messages is being marked or sent, so once the answer goes out nothing more
of it is submitted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import replace
from functools import partial

from appliance.providers.base import Outcome, OutgoingMessage
from appliance.providers.iys import BIREYSEL, RECIPIENT_TYPES, Iys
from appliance.providers.registry import Providers
from appliance.runtime import Runtime
from appliance.sending.claims import Claimed, next_due_ms, release_claimed
from appliance.sending.commercial import COMMERCIAL
from appliance.sending.credit import CreditWatch
from appliance.sending.failover import Moved, Router, move_waiting, reason_to_move
from appliance.sending.held_lanes import HeldLanes
from appliance.sending.provider_health import ProviderHealth
from appliance.sending.provider_lane import ProviderLane
from appliance.sending.recovery import recover_interrupted
from appliance.sending.send_counters import SendCounters
from appliance.sending.validity import remaining_s
from appliance.store.connection import Connection

log = logging.getLogger("appliance.sender")
LOOP = "sender"
IDLE_S = 1.0


class Sender:
    def __init__(self, appliance: Runtime, providers: Providers,
                 credit: CreditWatch | None = None, pulled: Collection[str] = ()) -> None:
        self.appliance = appliance
        self.providers = providers
        self.credit = credit or CreditWatch(appliance, providers)
        settings = appliance.settings
        self.counters = SendCounters()
        # ROUTE-3: the providers' live delivery, and the routes (None: none configured).
        self.health = ProviderHealth(appliance, providers, pulled)
        self.health.install()
        self.router = Router(settings, lambda: self.health.lowered) \
            if settings.routes else None
        self.lanes: dict[str, ProviderLane] = {}
        self.closing = False
        self.wake = appliance.scheduler.add(LOOP, self.step, interval_s=IDLE_S)
        for name in settings.providers:
            provider = providers.get(name)
            assert provider is not None
            self.lanes[name] = ProviderLane(
                appliance, self.counters, provider, settings.sending.batch_size, self.router,
                self.wake, partial(self.health.submitted, name))
        self.held = HeldLanes(appliance, self.credit, self.wake)

    async def close(self) -> None:
        """Let each worker finish the message it is sending (outcome recorded), give
        back what was only reserved, then close the transports."""
        self.closing = True
        for task in list(self.held.tasks):  # a held lane's credit query: asked again later
            task.cancel()
        for lane in self.lanes.values():
            lane.ready.set()
        workers = [t for lane in self.lanes.values() for t in lane.workers]
        if workers:
            await asyncio.wait(workers, timeout=self.appliance.settings.shutdown_timeout_s)
        for lane in self.lanes.values():
            lane.flusher.release(lane.drain())
            await asyncio.wait_for(lane.flusher.idle(),
                                   timeout=self.appliance.settings.shutdown_timeout_s)
        await self.providers.close()

    # -- what the campaign routes ask ---------------------------------------------------
    async def settle_campaign(self, campaign_id: int, timeout_s: float | None = None) -> int:
        """After a pause or a cancel committed: forget what is reserved of the campaign
        and wait until none of its messages is being marked or sent. Returns how many
        were still being sent when called."""
        timeout = timeout_s if timeout_s is not None else \
            self.appliance.settings.sending.submit_timeout_s + 5.0
        busy = 0
        for lane in self.lanes.values():
            lane.forget(campaign_id)
            busy += lane.active.get(campaign_id, 0)
        deadline = time.monotonic() + timeout
        for lane in self.lanes.values():
            while lane.active.get(campaign_id, 0) > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("campaign %s: %s messages still being sent after %.0f s",
                                campaign_id, lane.active[campaign_id], timeout)
                    break
                lane.changed.clear()
                try:
                    await asyncio.wait_for(lane.changed.wait(), timeout=left)
                except TimeoutError:
                    continue
        return busy

    def campaign_per_s(self, campaign_id: int) -> float:
        return self.counters.campaign_per_s(campaign_id)

    # -- the loop ----------------------------------------------------------------------
    async def step(self) -> float | None:
        """Reserve messages wherever the queue runs low (and any high-priority one that
        is due); return when to look again."""
        store = self.appliance.store
        for lane in self.lanes.values():
            if not lane.recovered:
                await self._recover(lane)
            if not lane.workers:
                lane.workers = [asyncio.create_task(self._work(lane), name=f"send:{lane.name}")
                                for _ in range(lane.concurrency)]
            if lane.failing and lane.held_s() > 0:
                await self._fail_over(lane)
            # Reserve a batch when less than one waits (so at most two are reserved);
            # the high-priority messages that are due, always.
            room = lane.batch_size if lane.waiting() < lane.batch_size else 0
            epoch = lane.hold_epoch
            claim = await store.writer.run(self.held.claim_unit(lane, room, lane.turn))
            batch = self.held.claimed(lane, claim, epoch)
            lane.turn += 1
            self.counters.claimed += len(batch)
            lane.add(batch)
        due = await store.readers.run(next_due_ms) if self.lanes else None
        wait_s = IDLE_S if due is None else (due - self.appliance.now_ms()) / 1000
        # Due already but not claimed just now: another provider's, a held campaign's, or
        # a full queue; look again at the usual pace rather than spin.
        return IDLE_S if wait_s <= 0 else min(IDLE_S, max(0.01, wait_s))

    async def _fail_over(self, lane: ProviderLane) -> None:
        """The lane's provider has not been reached ``failover_after`` tries in a row:
        what it had reserved is given back, and its routes' waiting messages move to
        their next provider (ROUTE-3). Its next try, once its hold ends, tells whether it
        is reached again."""
        router = self.router
        assert router is not None
        ids = lane.drain()
        now = self.appliance.now_ms()

        def unit(c: Connection) -> list[Moved]:
            release_claimed(c, ids)
            return move_waiting(c, router, lane.name, now)

        moved = await self.appliance.store.writer.run(unit)
        if moved:
            router.counted(moved)
            log.warning("provider %s not reached %s tries in a row: %s messages of its"
                        " routes moved on", lane.name, lane.unreached, len(moved))
            self.wake()

    async def _recover(self, lane: ProviderLane) -> None:
        now = self.appliance.now_ms()
        dedupes = lane.provider.dedupes_on_ref
        per_part = lane.provider.reports_per_part

        def unit(c: Connection) -> tuple[int, int]:
            released = release_claimed(c, provider=lane.name)
            return released, recover_interrupted(c, lane.name, now, dedupes, per_part)

        released, count = await self.appliance.store.writer.run(unit)
        lane.recovered = True
        self.counters.released += released
        if released:
            log.info("%s messages of provider %s were reserved, never sent, when the process"
                     " stopped; they are sent in their turn", released, lane.name)
        if count:
            self.counters.recovered += count
            log.warning("%s messages of provider %s were being sent when the process stopped;"
                        " marked %s", count, lane.name, "RETRY" if dedupes else "UNCERTAIN")

    async def _work(self, lane: ProviderLane) -> None:
        """One worker: at most one submission of its own (one message, or a batch of at
        most ``batch_max`` for a kind that takes many) marked ``SENDING`` at a time."""
        while not self.closing:
            if (held := lane.held_s()) > 0:  # the provider cannot be reached: wait
                await asyncio.sleep(min(held, 0.25))
                continue
            msg = lane.pop()
            if msg is None:
                await lane.ready.wait()
                continue
            group = [msg, *lane.take_like(msg, lane.batch_max - 1)]
            if lane.waiting() < lane.batch_size:  # just ran low: reserve more
                self.wake()
            ids = [m.id for m in group]
            try:
                await lane.transport.reserve(len(group))
            except Exception:  # a transport that cannot pace now: try again later
                log.exception("provider %s: waiting for the rate failed", lane.name)
                lane.flusher.release(ids)
                await asyncio.sleep(IDLE_S)
                continue
            window = msg.window
            if not lane.may_send(msg) or self.closing or (window is not None
                                and not window.is_open(self.appliance.now_ms())):
                # Its lane held, or its window closed: claimed again in its turn.
                lane.flusher.release(ids)
                continue
            for m in group:
                lane.started(m)
            try:
                await self._send(lane, group)
            finally:
                for m in group:
                    lane.finished(m)

    async def _send(self, lane: ProviderLane, group: list[Claimed]) -> None:
        """Mark the group ``SENDING`` (one unit), submit what was marked (one request),
        record each outcome, and hold the lane when the provider refuses everything."""
        marks = [lane.flusher.mark(m) for m in group]
        marked = [m for m in [await f for f in marks] if m is not None]
        if not marked:
            return  # paused, cancelled or settled meanwhile: not sent
        self.counters.attempts += len(marked)
        lane.unrecorded += len(marked)
        outcomes = await self._submit(lane, marked)
        refusal = next((o for o in outcomes if o.blocked is not None), None)
        if refusal is None and any(o.unreached for o in outcomes):
            wait = lane.unreachable(next(o.error for o in outcomes if o.unreached))
            outcomes = [replace(o, retry_after_s=wait) if o.unreached else o
                        for o in outcomes]
        else:
            lane.reached()
        refusals = lane.provider.route_refusals
        for m, outcome in zip(marked, outcomes, strict=True):
            move = None if self.router is None else \
                reason_to_move(m, outcome, lane.failing, refusals)
            lane.flusher.record(m, outcome, move)
        if refusal is not None:
            await self.held.blocked(lane, marked[0], refusal)
            return
        for m, outcome in zip(marked, outcomes, strict=True):
            await self.held.answered(lane, m, outcome)

    async def _submit(self, lane: ProviderLane, msgs: list[Claimed]) -> list[Outcome]:
        callback = self.appliance.settings.callback_url(lane.name)
        out = [OutgoingMessage(ref=m.ref, msisdn=m.msisdn, body=m.body, callback_url=callback,
                               skip_parts=m.skip_parts, encoding=m.encoding,
                               iys=self._iys(m), validity_s=self._validity(lane, m))
               for m in msgs]
        if len(out) == 1:
            return [await lane.transport.submit(out[0])]
        self.counters.batch_requests += 1
        return await lane.transport.submit_batch(out)


    def _validity(self, lane: ProviderLane, msg: Claimed) -> int | None:
        """What is left of ``msg``'s validity (ROUTE-4) as its provider's kind carries it:
        whole seconds, within the kind's range; ``None`` without one (or a kind without
        the field: the validity is then kept here only)."""
        left = remaining_s(msg.expires_at, self.appliance.now_ms())
        span = lane.validity_range_s
        return None if left is None or span is None else min(max(left, span[0]), span[1])

    def _iys(self, msg: Claimed) -> Iys | None:
        """What ``msg`` says to its provider about İYS (IYS-2): with ``[compliance]
        country = "TR"``, commercial with its recipient type (``BIREYSEL`` without a
        record) and the brand code, or not commercial; ``None`` without compliance or
        without a stated type (the provider's table decides, as before)."""
        compliance = self.appliance.settings.compliance
        if not compliance.turkey or msg.message_type is None:
            return None
        kind = msg.recipient_type if msg.recipient_type in RECIPIENT_TYPES else BIREYSEL
        return Iys(commercial=msg.message_type == COMMERCIAL, recipient_type=kind,
                   brand_code=compliance.iys_brand_code)


def install(runtime: Runtime, providers: Providers,
            credit: CreditWatch | None = None, pulled: Collection[str] = ()) -> Sender:
    """The sender, its loop registered (``Sender.wake`` wakes it); closed at the stop.
    ``pulled``: the providers asked about their messages (ROUTE-2), whose delivery is
    judged over their pull window (:mod:`appliance.sending.provider_health`)."""
    sender = Sender(runtime, providers, credit, pulled)
    runtime.on_stop(sender.close)
    return sender
