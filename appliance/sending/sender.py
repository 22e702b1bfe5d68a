"""The sender loop (DLR-8): claim due messages, submit them, record what came of it.

One scheduler loop, ``sender``. Each step, for each configured provider with room
in its pipeline (at most :data:`PIPELINE_DEPTH` batches in flight), claims a batch of
due messages in one write unit (-> ``SENDING``, committed before any byte leaves),
then submits the batch in a task while the loop goes on to claim the next one. The
provider's transport (:mod:`appliance.providers.http_transport` for the HTTP kinds)
paces the submissions by its rate and caps them at its concurrency, and says what
came of each. When every submission of the batch has an outcome, one write unit
records them all with guarded updates and applies the reports that arrived early
(DLR-6).

A batch is at most about one second of the provider's rate (never more than
``[sending] batch_size``): messages claimed but not yet sent when the process dies
become ``UNCERTAIN`` at the next start, so the claim is kept small.

At start, before the first claim, messages a crash left in ``SENDING`` become
``UNCERTAIN`` (``RETRY`` where the provider drops repeats of our ref): nobody can
know whether the provider got them, and the money rule is never to send twice.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import apsw

from appliance.providers.base import Outcome, OutgoingMessage, Provider
from appliance.sending.messages import (
    Claimed,
    Recorded,
    claim_due,
    next_due_ms,
    record_outcomes,
    recover_interrupted,
)
from appliance.service import Appliance

log = logging.getLogger("appliance.sender")
LOOP = "sender"
PIPELINE_DEPTH = 2
IDLE_S = 1.0
RECORD_TRIES = 5


@dataclass
class SendCounters:
    """What the sender did since start, for metrics."""

    claimed: int = 0
    attempts: int = 0
    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    early_reports_applied: int = 0
    recovered: int = 0
    batches: int = 0
    record_failures: int = 0
    _recent: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, rec: Recorded) -> None:
        self.submitted += rec.submitted
        self.retry += rec.retry
        self.rejected += rec.rejected
        self.uncertain += rec.uncertain
        self.early_reports_applied += rec.applied_reports
        self.batches += 1
        now = time.monotonic()
        self._recent.append((now, rec.submitted))
        while self._recent and now - self._recent[0][0] > 10.0:
            self._recent.popleft()

    @property
    def submitted_per_s(self) -> float:
        """Submissions recorded per second over the last ten seconds."""
        if not self._recent:
            return 0.0
        span = max(1.0, time.monotonic() - self._recent[0][0])
        return sum(n for _, n in self._recent) / span

    def as_dict(self) -> dict[str, float]:
        return {
            "claimed": self.claimed, "attempts": self.attempts, "submitted": self.submitted,
            "retry": self.retry, "rejected": self.rejected, "uncertain": self.uncertain,
            "early_reports_applied": self.early_reports_applied, "recovered": self.recovered,
            "batches": self.batches, "record_failures": self.record_failures,
            "submitted_per_s": round(self.submitted_per_s, 1),
        }


class ProviderLane:
    """One provider's batches: its transport, the batch size, the batches in flight."""

    def __init__(self, provider: Provider, batch_size: int) -> None:
        s = provider.settings
        self.provider = provider
        self.name = provider.name
        self.transport = provider.transport
        rate_batch = math.ceil(s.rate_per_s) if s.rate_per_s > 0 else batch_size
        self.batch_size = max(1, min(batch_size, max(self.transport.concurrency, rate_batch)))
        self.in_flight: set[asyncio.Task[None]] = set()
        self.recovered = False


class Sender:
    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        settings = appliance.settings
        self.lanes: dict[str, ProviderLane] = {}
        for name in settings.providers:
            provider = appliance.providers.get(name)
            assert provider is not None
            self.lanes[name] = ProviderLane(provider, settings.sending.batch_size)
        self.counters = SendCounters()

    async def close(self) -> None:
        """Finish the batches in flight (outcomes recorded), then close the transports."""
        tasks = [t for lane in self.lanes.values() for t in lane.in_flight]
        if tasks:
            await asyncio.wait(tasks, timeout=self.appliance.settings.shutdown_timeout_s)
        await self.appliance.providers.close()

    # -- the loop ----------------------------------------------------------------------
    async def step(self) -> float | None:
        """Claim and launch batches wherever there is room; return when to look again."""
        store = self.appliance.store
        busy = False
        for lane in self.lanes.values():
            if not lane.recovered:
                await self._recover(lane)
            while len(lane.in_flight) < PIPELINE_DEPTH:
                batch = await store.writer.run(self._claim_unit(lane))
                if not batch:
                    break
                self.counters.claimed += len(batch)
                task = asyncio.create_task(self._run_batch(lane, batch),
                                           name=f"send:{lane.name}")
                lane.in_flight.add(task)
                task.add_done_callback(lane.in_flight.discard)
                if len(batch) < lane.batch_size:
                    break
            if len(lane.in_flight) >= PIPELINE_DEPTH:
                busy = True
        if busy:
            return IDLE_S  # a finishing batch wakes the loop
        due = await store.readers.run(next_due_ms) if self.lanes else None
        wait_s = IDLE_S if due is None else (due - self.appliance.now_ms()) / 1000
        # Due already but not claimed just now: another provider's (or one no longer
        # configured); look again at the usual pace rather than spin.
        return IDLE_S if wait_s <= 0 else min(IDLE_S, max(0.01, wait_s))

    def _claim_unit(self, lane: ProviderLane) -> Callable[[apsw.Connection], list[Claimed]]:
        now = self.appliance.now_ms()
        return lambda c: claim_due(c, lane.name, now, lane.batch_size)

    async def _recover(self, lane: ProviderLane) -> None:
        now = self.appliance.now_ms()
        dedupes = lane.provider.dedupes_on_ref
        per_part = lane.provider.reports_per_part
        count = await self.appliance.store.writer.run(
            lambda c: recover_interrupted(c, lane.name, now, dedupes, per_part))
        lane.recovered = True
        if count:
            self.counters.recovered += count
            log.warning("%s messages of provider %s were being sent when the process stopped;"
                        " marked %s", count, lane.name, "RETRY" if dedupes else "UNCERTAIN")

    async def _run_batch(self, lane: ProviderLane, batch: list[Claimed]) -> None:
        try:
            outcomes = await asyncio.gather(*(self._submit(lane, m) for m in batch))
            await self._record(lane, list(zip(batch, outcomes, strict=True)))
        finally:
            self.appliance.scheduler.wake(LOOP)

    async def _submit(self, lane: ProviderLane, msg: Claimed) -> Outcome:
        callback = self.appliance.settings.callback_url(lane.name)
        self.counters.attempts += 1
        return await lane.transport.submit(
            OutgoingMessage(ref=msg.ref, msisdn=msg.msisdn, body=msg.body,
                            callback_url=callback, skip_parts=msg.skip_parts))

    async def _record(self, lane: ProviderLane, results: list[tuple[Claimed, Outcome]]) -> None:
        sending = self.appliance.settings.sending
        provider = lane.provider
        for attempt in range(RECORD_TRIES):
            now = self.appliance.now_ms()

            def unit(c: apsw.Connection, now: int = now) -> Recorded:
                return record_outcomes(
                    c, lane.name, results, now, max_attempts=sending.max_attempts,
                    dedupes_on_ref=provider.dedupes_on_ref,
                    map_provider_ids=provider.reports_by_provider_id_only,
                    reports_per_part=provider.reports_per_part)

            try:
                rec = await self.appliance.store.writer.run(unit)
            except Exception:
                self.counters.record_failures += 1
                log.exception("recording a batch of %s outcomes failed (try %s)",
                              len(results), attempt + 1)
                await asyncio.sleep(0.2 * 2 ** attempt)
                continue
            self.counters.add(rec)
            return
        log.error("%s messages stay SENDING until the next start (then UNCERTAIN)", len(results))


def install(appliance: Appliance) -> None:
    """Register the sender loop and the campaign expansion loop."""
    from appliance.sending.expansion import CampaignExpander

    sender = Sender(appliance)
    appliance.sender = sender
    appliance.scheduler.add(LOOP, sender.step, interval_s=IDLE_S)
    appliance.on_stop(sender.close)
    expander = CampaignExpander(appliance)
    appliance.scheduler.add("campaigns", expander.step, interval_s=1.0)
