"""One provider's lane: its reserved messages in sending order, and its small write units.

The lane's queue takes high-priority messages first, then the campaigns and the single
messages of normal priority in turn (OPS-1). Its :class:`Flusher` groups the workers'
marks and outcomes into small write units that share one group commit. While the
provider cannot be reached the lane is held, longer each time (never giving a message
up for it); while it refuses every message until its operator acts, the lane holds
until a retry finds it taking messages again (:mod:`appliance.sending.held_lanes`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from appliance.providers.base import Outcome, Provider, SubmitResult
from appliance.runtime import Runtime
from appliance.sending.campaigns import PRIORITY_HIGH
from appliance.sending.claims import Claimed, mark_sending, release_claimed
from appliance.sending.failover import Router
from appliance.sending.outcomes import Recorded, record_outcomes
from appliance.sending.provider_holds import Hold
from appliance.sending.send_counters import SendCounters
from appliance.store.connection import Connection

log = logging.getLogger("appliance.sender")
# While a provider cannot be reached, its lane waits this long before trying again,
# doubling each time (to the cap), and its messages wait as long.
HOLD_BASE_S = 1.0
HOLD_CAP_S = 30.0
RECORD_TRIES = 5


@dataclass
class _Record:
    msg: Claimed
    outcome: Outcome
    tries: int = 0
    move: str | None = None  # ROUTE-3: why it may go to its route's next provider


class Flusher:
    """One lane's small write units: outcomes recorded, messages marked ``SENDING``,
    reservations given back. Whatever is ready while a unit commits goes in the next,
    outcomes before marks (the writer runs units in order, in one group commit when
    they arrive together)."""

    def __init__(self, appliance: Runtime, counters: SendCounters,
                 lane: ProviderLane) -> None:
        self.appliance = appliance
        self.counters = counters
        self.lane = lane
        self._records: list[_Record] = []
        self._marks: list[tuple[Claimed, asyncio.Future[Claimed | None]]] = []
        self._releases: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def mark(self, msg: Claimed) -> asyncio.Future[Claimed | None]:
        fut: asyncio.Future[Claimed | None] = asyncio.get_running_loop().create_future()
        self._marks.append((msg, fut))
        self._kick()
        return fut

    def record(self, msg: Claimed, outcome: Outcome, move: str | None = None) -> None:
        self._records.append(_Record(msg, outcome, move=move))
        self._kick()

    def release(self, ids: list[int]) -> None:
        if ids:
            self._releases += ids
            self._kick()

    async def idle(self) -> None:
        await self._idle.wait()

    def _kick(self) -> None:
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"flush:{self.lane.name}")

    async def _run(self) -> None:
        try:
            while self._records or self._marks or self._releases:
                await self._flush_once()
        finally:
            self._idle.set()

    async def _flush_once(self) -> None:
        records, self._records = self._records, []
        marks, self._marks = self._marks, []
        releases, self._releases = self._releases, []
        appliance = self.appliance
        writer = appliance.store.writer
        now = appliance.now_ms()
        lane = self.lane
        provider = lane.provider
        sending = appliance.settings.sending
        waits: list[tuple[str, asyncio.Future[Any]]] = []

        def record_unit(c: Connection) -> Recorded:
            return record_outcomes(
                c, lane.name, [(r.msg, r.outcome) for r in records], now,
                max_attempts=sending.max_attempts, dedupes_on_ref=provider.dedupes_on_ref,
                map_provider_ids=provider.reports_by_provider_id_only,
                reports_per_part=provider.reports_per_part, router=lane.router,
                moving={r.msg.id: r.move for r in records if r.move is not None})

        claimed = [m for m, _ in marks]
        gate = appliance.settings.compliance.turkey
        try:
            if records:
                waits.append(("record", asyncio.wrap_future(writer.submit(record_unit))))
            if releases:
                waits.append(("release", asyncio.wrap_future(writer.submit(
                    lambda c: release_claimed(c, releases)))))
            if marks:
                waits.append(("mark", asyncio.wrap_future(writer.submit(
                    lambda c: mark_sending(c, claimed, now, consent_gate=gate,
                                           provider=lane.name)))))
        except Exception as exc:  # the writer is stopped
            log.error("the sender could not write: %s", exc)
            for _, fut in marks:
                if not fut.done():
                    fut.set_result(None)
            for _, w in waits:
                w.cancel()
            return
        for kind, wait in waits:
            try:
                result = await wait
            except Exception:
                log.exception("a sender unit (%s) failed", kind)
                if kind == "record":
                    self.counters.record_failures += 1
                    again = [r for r in records if r.tries + 1 < RECORD_TRIES]
                    for r in again:
                        r.tries += 1
                    if len(again) < len(records):
                        log.error("%s messages stay SENDING until the next start (then"
                                  " UNCERTAIN)", len(records) - len(again))
                    if again:
                        await asyncio.sleep(0.2 * 2 ** again[0].tries)
                        self._records = again + self._records
                elif kind == "mark":
                    for _, fut in marks:
                        if not fut.done():
                            fut.set_result(None)
                    self._releases += [m.id for m in claimed]
                continue
            if kind == "record":
                self.counters.add(result)
                if result.moved and lane.router is not None:
                    lane.router.counted(result.moved)
                    lane.moved()
                if lane.router is not None:  # ROUTE-3: what the provider took, and when
                    lane.submitted(now, [r.msg.id for r in records
                                         if r.outcome.result is SubmitResult.ACCEPTED])
                out = Counter(r.msg.campaign_id for r in records
                              if r.msg.campaign_id is not None
                              and r.outcome.result is not SubmitResult.RETRY)
                for cid, n in out.items():
                    self.counters.went_out(cid, n)
                lane.recorded(len(records))
            elif kind == "mark":
                taken = {m.id: m for m in result}
                for msg, fut in marks:
                    if not fut.done():
                        fut.set_result(taken.get(msg.id))


class ProviderLane:
    """One provider's reserved messages, its workers and its write units."""

    def __init__(self, appliance: Runtime, counters: SendCounters, provider: Provider,
                 batch_size: int, router: Router | None = None,
                 moved: Callable[[], None] = lambda: None,
                 submitted: Callable[[int, list[int]], None] = lambda at, ids: None) -> None:
        s = provider.settings
        # ROUTE-3: the routes (None: none configured), who to tell when messages moved,
        # and when the provider took messages (its live delivery is judged over them).
        self.router = router
        self.moved = moved
        self.submitted = submitted
        self.failover_after = s.failover_after
        self.provider = provider
        self.name = provider.name
        self.transport = provider.transport
        self.validity_range_s = provider.validity_range_s  # ROUTE-4: what the wire carries
        self.concurrency = max(1, self.transport.concurrency)
        rate_batch = math.ceil(s.rate_per_s) if s.rate_per_s > 0 else batch_size
        self.batch_size = max(1, min(batch_size, max(self.concurrency, rate_batch)))
        # Messages one submission carries, for a kind that takes many in a request: the
        # claim then reserves enough for every worker's request to be full.
        self.batch_max = max(1, self.transport.batch_max)
        if self.batch_max > 1:
            self.batch_size = max(self.batch_size,
                                  min(batch_size, self.batch_max * self.concurrency))
        self.high: deque[Claimed] = deque()
        # Normal priority, one queue per campaign (None: single messages), taken from in
        # turn: a campaign reserved first does not hold the others back (OPS-1).
        self.normal: dict[int | None, deque[Claimed]] = {}
        self._turns: deque[int | None] = deque()
        self.ready = asyncio.Event()
        self.flusher = Flusher(appliance, counters, self)
        self.workers: list[asyncio.Task[None]] = []
        self.recovered = False
        self.turn = 0
        # Messages being marked or sent, by campaign (None: single messages).
        self.active: Counter[int | None] = Counter()
        self.changed = asyncio.Event()
        self.unrecorded = 0  # handed to the transport, outcome not committed yet
        self.held_until = 0.0  # monotonic: while the provider cannot be reached
        self.unreached = 0  # tries in a row that did not reach it
        # The provider refuses every message until its operator acts (see
        # appliance.sending.held_lanes): nothing is claimed or sent but the messages
        # of a retry; ``hold_stored`` once the hold is in the database, ``hold_epoch``
        # counts the holds this process began.
        self.hold: Hold | None = None
        self.hold_stored = False
        self.hold_epoch = 0
        self.retry_ids: set[int] = set()

    def unreachable(self, error: str | None) -> float:
        """The provider was not reached: hold the lane (a longer hold each time it fails
        again after one ended). Returns how long the message waits."""
        now = time.monotonic()
        if now >= self.held_until:
            self.unreached += 1
            hold = min(HOLD_CAP_S, HOLD_BASE_S * 2 ** (self.unreached - 1))
            self.held_until = now + hold
            if self.unreached == 1:
                log.warning("provider %s cannot be reached (%s): its messages wait, none is"
                            " given up; trying again every %.0f to %.0f s", self.name,
                            error, HOLD_BASE_S, HOLD_CAP_S)
        return max(0.0, self.held_until - now)

    @property
    def failing(self) -> bool:
        """Not reached ``failover_after`` tries in a row: its routes' messages move on
        (:mod:`appliance.sending.failover`) until a try reaches it again."""
        return self.router is not None and self.unreached >= self.failover_after

    def reached(self) -> None:
        if self.unreached:
            log.warning("provider %s reached again after %s tries", self.name,
                        self.unreached)
        self.unreached = 0
        self.held_until = 0.0

    def may_send(self, msg: Claimed) -> bool:
        """Whether ``msg`` may go now: the lane is not held, or it is the held lane's
        retry."""
        return self.hold is None or msg.id in self.retry_ids

    def held_s(self) -> float:
        return max(0.0, self.held_until - time.monotonic())

    def waiting(self) -> int:
        return len(self.high) + sum(len(q) for q in self.normal.values())

    def add(self, batch: list[Claimed]) -> None:
        for msg in batch:
            if msg.priority == PRIORITY_HIGH:
                self.high.append(msg)
                continue
            queue = self.normal.get(msg.campaign_id)
            if queue is None:
                queue = self.normal[msg.campaign_id] = deque()
                self._turns.append(msg.campaign_id)
            queue.append(msg)
        if batch:
            self.ready.set()

    def pop(self) -> Claimed | None:
        """The next message to send: high priority first, then the campaigns in turn."""
        msg: Claimed | None = None
        if self.high:
            msg = self.high.popleft()
        while msg is None and self._turns:
            key = self._turns.popleft()
            queue = self.normal[key]
            msg = queue.popleft()
            if queue:
                self._turns.append(key)
            else:
                del self.normal[key]
        if not self.waiting():
            self.ready.clear()
        return msg

    def take_like(self, first: Claimed, most: int) -> list[Claimed]:
        """Up to ``most`` more reserved messages that may go in one request with
        ``first`` (just popped): from the same queue (its campaign's, the single
        messages', or the high-priority one), in their order, with the same text (after
        personalisation) and encoding, the same type and recipient type (one request
        says one thing about İYS: :mod:`appliance.providers.iys`), with a validity when
        ``first`` has one (ROUTE-4; a request-wide field carries the shortest), and
        nothing of theirs at the provider yet."""
        if most <= 0 or first.known_parts:
            return []
        high = first.priority == PRIORITY_HIGH
        queue = self.high if high else self.normal.get(first.campaign_id)
        if not queue:
            return []
        taken: list[Claimed] = []
        kept: deque[Claimed] = deque()
        while queue and len(taken) < most:
            m = queue.popleft()
            alike = (m.body == first.body and m.encoding == first.encoding
                     and not m.known_parts and m.window == first.window
                     and m.message_type == first.message_type
                     and m.recipient_type == first.recipient_type
                     and (m.expires_at is None) == (first.expires_at is None))
            (taken if alike else kept).append(m)
        queue.extendleft(reversed(kept))
        if not high and not queue:
            del self.normal[first.campaign_id]
            self._turns.remove(first.campaign_id)
        if not self.waiting():
            self.ready.clear()
        return taken

    def forget(self, campaign_id: int) -> list[int]:
        """Drop the campaign's reserved messages from the queue; returns their ids."""
        gone = self.normal.pop(campaign_id, deque())
        if gone:
            self._turns.remove(campaign_id)
        if not self.waiting():
            self.ready.clear()
        return [m.id for m in gone]

    def drain(self) -> list[int]:
        ids = [m.id for m in self.high] + [m.id for q in self.normal.values() for m in q]
        self.high.clear()
        self.normal.clear()
        self._turns.clear()
        self.ready.clear()
        return ids

    def started(self, msg: Claimed) -> None:
        self.active[msg.campaign_id] += 1

    def finished(self, msg: Claimed) -> None:
        self.active[msg.campaign_id] -= 1
        if self.active[msg.campaign_id] <= 0:
            del self.active[msg.campaign_id]
        self.changed.set()

    def recorded(self, count: int) -> None:
        self.unrecorded -= count

