"""The sender (DLR-8, OPS-1, OPS-6): claim due messages, submit them, record each outcome.

One scheduler loop, ``sender``, keeps for each configured provider a *lane*: an
in-memory queue of reserved messages (high priority first) and ``concurrency``
workers. Each step it reserves more due messages when fewer than a batch (about one
second of the provider's rate, at most ``[sending] batch_size``) are waiting, and it
always takes any high-priority message that is due, which goes to the head of the
queue (:func:`~appliance.sending.messages.claim_due`: high first, then the campaigns
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

A pause or a cancel is committed by the campaign's own unit; the sender then forgets
what it had reserved of that campaign, and :meth:`Sender.settle_campaign` waits until
none of its messages is being marked or sent, so once the answer goes out nothing more
of it is submitted.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from appliance.providers.base import Outcome, OutgoingMessage, Provider, SubmitResult
from appliance.sending.campaigns import PRIORITY_HIGH
from appliance.sending.messages import (
    Claimed,
    Recorded,
    claim_due,
    mark_sending,
    next_due_ms,
    record_outcomes,
    recover_interrupted,
    release_claimed,
)
from appliance.service import Appliance
from appliance.store.connection import Connection

log = logging.getLogger("appliance.sender")
LOOP = "sender"
IDLE_S = 1.0
# While a provider cannot be reached, its lane waits this long before trying again,
# doubling each time (to the cap), and its messages wait as long.
HOLD_BASE_S = 1.0
HOLD_CAP_S = 30.0
RECORD_TRIES = 5
RATE_WINDOW_S = 10.0


@dataclass
class SendCounters:
    """What the sender did since start, for metrics and campaign progress."""

    claimed: int = 0
    attempts: int = 0
    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    early_reports_applied: int = 0
    recovered: int = 0
    released: int = 0
    batches: int = 0
    record_failures: int = 0
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    _by_campaign: dict[int, deque[tuple[float, int]]] = field(default_factory=dict)

    def add(self, rec: Recorded) -> None:
        self.submitted += rec.submitted
        self.retry += rec.retry
        self.rejected += rec.rejected
        self.uncertain += rec.uncertain
        self.early_reports_applied += rec.applied_reports
        self.batches += 1
        now = time.monotonic()
        self._recent.append((now, rec.submitted))
        self._trim(self._recent, now)

    def went_out(self, campaign_id: int, count: int) -> None:
        """``count`` messages of a campaign got an answer from the provider."""
        now = time.monotonic()
        recent = self._by_campaign.setdefault(campaign_id, deque())
        recent.append((now, count))
        self._trim(recent, now)

    @staticmethod
    def _trim(recent: deque[tuple[float, int]], now: float) -> None:
        while recent and now - recent[0][0] > RATE_WINDOW_S:
            recent.popleft()

    @staticmethod
    def _rate(recent: deque[tuple[float, int]] | None) -> float:
        if not recent:
            return 0.0
        now = time.monotonic()
        span = max(1.0, now - recent[0][0]) if now - recent[-1][0] <= RATE_WINDOW_S else 0.0
        return sum(n for _, n in recent) / span if span else 0.0

    @property
    def submitted_per_s(self) -> float:
        """Submissions recorded per second over the last ten seconds."""
        return self._rate(self._recent)

    def campaign_per_s(self, campaign_id: int) -> float:
        """Messages of the campaign sent per second over the last ten seconds."""
        return self._rate(self._by_campaign.get(campaign_id))

    def as_dict(self) -> dict[str, float]:
        return {
            "claimed": self.claimed, "attempts": self.attempts, "submitted": self.submitted,
            "retry": self.retry, "rejected": self.rejected, "uncertain": self.uncertain,
            "early_reports_applied": self.early_reports_applied, "recovered": self.recovered,
            "released": self.released, "batches": self.batches,
            "record_failures": self.record_failures,
            "submitted_per_s": round(self.submitted_per_s, 1),
        }


@dataclass
class _Record:
    msg: Claimed
    outcome: Outcome
    tries: int = 0


class Flusher:
    """One lane's small write units: outcomes recorded, messages marked ``SENDING``,
    reservations given back. Whatever is ready while a unit commits goes in the next,
    outcomes before marks (the writer runs units in order, in one group commit when
    they arrive together)."""

    def __init__(self, sender: Sender, lane: ProviderLane) -> None:
        self.sender = sender
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

    def record(self, msg: Claimed, outcome: Outcome) -> None:
        self._records.append(_Record(msg, outcome))
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
        appliance = self.sender.appliance
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
                reports_per_part=provider.reports_per_part)

        claimed = [m for m, _ in marks]
        try:
            if records:
                waits.append(("record", asyncio.wrap_future(writer.submit(record_unit))))
            if releases:
                waits.append(("release", asyncio.wrap_future(writer.submit(
                    lambda c: release_claimed(c, releases)))))
            if marks:
                waits.append(("mark", asyncio.wrap_future(writer.submit(
                    lambda c: mark_sending(c, claimed, now)))))
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
                    self.sender.counters.record_failures += 1
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
                self.sender.counters.add(result)
                out = Counter(r.msg.campaign_id for r in records
                              if r.msg.campaign_id is not None
                              and r.outcome.result is not SubmitResult.RETRY)
                for cid, n in out.items():
                    self.sender.counters.went_out(cid, n)
                lane.recorded(len(records))
            elif kind == "mark":
                taken = {m.id: m for m in result}
                for msg, fut in marks:
                    if not fut.done():
                        fut.set_result(taken.get(msg.id))


class ProviderLane:
    """One provider's reserved messages, its workers and its write units."""

    def __init__(self, sender: Sender, provider: Provider, batch_size: int) -> None:
        s = provider.settings
        self.provider = provider
        self.name = provider.name
        self.transport = provider.transport
        self.concurrency = max(1, self.transport.concurrency)
        rate_batch = math.ceil(s.rate_per_s) if s.rate_per_s > 0 else batch_size
        self.batch_size = max(1, min(batch_size, max(self.concurrency, rate_batch)))
        self.high: deque[Claimed] = deque()
        # Normal priority, one queue per campaign (None: single messages), taken from in
        # turn: a campaign reserved first does not hold the others back (OPS-1).
        self.normal: dict[int | None, deque[Claimed]] = {}
        self._turns: deque[int | None] = deque()
        self.ready = asyncio.Event()
        self.flusher = Flusher(sender, self)
        self.workers: list[asyncio.Task[None]] = []
        self.recovered = False
        self.turn = 0
        # Messages being marked or sent, by campaign (None: single messages).
        self.active: Counter[int | None] = Counter()
        self.changed = asyncio.Event()
        self.unrecorded = 0  # handed to the transport, outcome not committed yet
        self.held_until = 0.0  # monotonic: while the provider cannot be reached
        self.unreached = 0  # tries in a row that did not reach it

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

    def reached(self) -> None:
        if self.unreached:
            log.warning("provider %s reached again after %s tries", self.name,
                        self.unreached)
        self.unreached = 0
        self.held_until = 0.0

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


class Sender:
    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        settings = appliance.settings
        self.lanes: dict[str, ProviderLane] = {}
        for name in settings.providers:
            provider = appliance.providers.get(name)
            assert provider is not None
            self.lanes[name] = ProviderLane(self, provider, settings.sending.batch_size)
        self.counters = SendCounters()
        self.closing = False

    async def close(self) -> None:
        """Let each worker finish the message it is sending (outcome recorded), give
        back what was only reserved, then close the transports."""
        self.closing = True
        for lane in self.lanes.values():
            lane.ready.set()
        workers = [t for lane in self.lanes.values() for t in lane.workers]
        if workers:
            await asyncio.wait(workers, timeout=self.appliance.settings.shutdown_timeout_s)
        for lane in self.lanes.values():
            lane.flusher.release(lane.drain())
            await asyncio.wait_for(lane.flusher.idle(),
                                   timeout=self.appliance.settings.shutdown_timeout_s)
        await self.appliance.providers.close()

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
            # Reserve a batch when less than one waits (so at most two are reserved);
            # the high-priority messages that are due, always.
            room = lane.batch_size if lane.waiting() < lane.batch_size else 0
            batch = await store.writer.run(self._claim_unit(lane, room))
            lane.turn += 1
            self.counters.claimed += len(batch)
            lane.add(batch)
        due = await store.readers.run(next_due_ms) if self.lanes else None
        wait_s = IDLE_S if due is None else (due - self.appliance.now_ms()) / 1000
        # Due already but not claimed just now: another provider's, a held campaign's, or
        # a full queue; look again at the usual pace rather than spin.
        return IDLE_S if wait_s <= 0 else min(IDLE_S, max(0.01, wait_s))

    def _claim_unit(self, lane: ProviderLane,
                    room: int) -> Callable[[Connection], list[Claimed]]:
        now = self.appliance.now_ms()
        turn = lane.turn
        return lambda c: claim_due(c, lane.name, now, lane.batch_size, turn, normal_limit=room)

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
        """One worker: at most one message of its own marked ``SENDING`` at a time."""
        while not self.closing:
            if (held := lane.held_s()) > 0:  # the provider cannot be reached: wait
                await asyncio.sleep(min(held, 0.25))
                continue
            msg = lane.pop()
            if msg is None:
                await lane.ready.wait()
                continue
            if lane.waiting() in (0, lane.batch_size - 1):  # just ran low: reserve more
                self.appliance.scheduler.wake(LOOP)
            try:
                await lane.transport.reserve()
            except Exception:  # a transport that cannot pace now: try again later
                log.exception("provider %s: waiting for the rate failed", lane.name)
                lane.flusher.release([msg.id])
                await asyncio.sleep(IDLE_S)
                continue
            window = msg.window
            if self.closing or (window is not None
                                and not window.is_open(self.appliance.now_ms())):
                lane.flusher.release([msg.id])  # its window closed: claimed again when open
                continue
            lane.started(msg)
            try:
                marked = await lane.flusher.mark(msg)
                if marked is None:
                    continue  # paused, cancelled or settled meanwhile: not sent
                self.counters.attempts += 1
                lane.unrecorded += 1
                outcome = await self._submit(lane, marked)
                if outcome.unreached:
                    outcome = replace(outcome, retry_after_s=lane.unreachable(outcome.error))
                else:
                    lane.reached()
                lane.flusher.record(marked, outcome)
            finally:
                lane.finished(msg)

    async def _submit(self, lane: ProviderLane, msg: Claimed) -> Outcome:
        callback = self.appliance.settings.callback_url(lane.name)
        return await lane.transport.submit(
            OutgoingMessage(ref=msg.ref, msisdn=msg.msisdn, body=msg.body,
                            callback_url=callback, skip_parts=msg.skip_parts))


def install(appliance: Appliance) -> None:
    """Register the sender loop and the campaign expansion loop."""
    from appliance.sending.expansion import CampaignExpander

    sender = Sender(appliance)
    appliance.sender = sender
    appliance.scheduler.add(LOOP, sender.step, interval_s=IDLE_S)
    appliance.on_stop(sender.close)
    expander = CampaignExpander(appliance)
    appliance.scheduler.add("campaigns", expander.step, interval_s=1.0)
