"""Holding a provider's lane while it refuses every message, and resuming by itself.

A submission answered with :attr:`~appliance.providers.outcome.Outcome.blocked` (no
credit, a header not registered, an address not allowed) goes back to ``QUEUED``, its
attempt not counted (:mod:`appliance.sending.outcomes`), and :meth:`HeldLanes.blocked`
holds the lane: in this process at once (what was reserved is given back, nothing more
is sent), and in the database (:mod:`appliance.sending.provider_holds`), where every
process's sender finds it at its next claim and the alert ``provider_blocked`` reads it.
Other providers' lanes go on sending.

Each claim of a held lane asks instead whether its retry is due (10 s after the hold
began, then every ``[sending] blocked_retry_s``, or sooner when the provider said so).
The process that takes the retry asks the provider for its credit when the lane is held
for ``no_credit`` and the kind has a credit query (a credit above 0 lifts the hold),
else sends one message: an answer that is not a refusal of every message lifts the
hold, another refusal keeps it.
Once the hold is gone from the database every process's lane resumes at its next
claim (within a second).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from appliance.providers.outcome import Outcome
from appliance.runtime import Runtime
from appliance.sending import provider_holds
from appliance.sending.claims import Claimed, claim_due
from appliance.sending.credit import CreditWatch
from appliance.sending.provider_holds import Hold
from appliance.sending.provider_lane import ProviderLane
from appliance.store.connection import Connection

log = logging.getLogger("appliance.sender")
# A hold just begun is first tried again this soon (at most), then every interval.
FIRST_RETRY_MS = 10_000


@dataclass(frozen=True)
class Claim:
    """What a lane's claim unit found: the lane's hold (``None``: not held), whether
    this process takes the hold's retry (``retry``; ``by_credit``: by asking for the
    credit), and the messages reserved (a held lane's: the one of its retry)."""

    hold: Hold | None
    batch: list[Claimed] = field(default_factory=list)
    retry: bool = False
    by_credit: bool = False


class HeldLanes:
    """The sender's part that holds and resumes its providers' lanes."""

    def __init__(self, appliance: Runtime, credit: CreditWatch,
                 wake: Callable[[], None]) -> None:
        self.appliance = appliance
        self.credit = credit
        self.wake = wake
        self.tasks: set[asyncio.Task[None]] = set()

    def retry_ms(self, asked_s: float | None = None) -> int:
        """How long a held lane waits before it tries again: ``blocked_retry_s``, or
        sooner when the provider's answer asked for it."""
        wait = self.appliance.settings.sending.blocked_retry_s
        if asked_s is not None and math.isfinite(asked_s) and asked_s > 0:
            wait = min(wait, asked_s)
        return int(wait * 1000)

    def claim_unit(self, lane: ProviderLane, room: int,
                   turn: int) -> Callable[[Connection], Claim]:
        """The lane's claim: when the database holds its provider, no claim but the
        retry's (taken by one process at a time); else due messages, as usual (none while
        this process's own hold is not stored yet)."""
        now = self.appliance.now_ms()
        name, size, retry = lane.name, lane.batch_size, self.retry_ms()
        local_hold = lane.hold is not None
        has_credit = lane.provider.credit is not None

        def unit(c: Connection) -> Claim:
            found = provider_holds.held(c).get(name)
            if found is None:
                if local_hold:
                    return Claim(None)
                return Claim(None, claim_due(c, name, now, size, turn, normal_limit=room))
            if provider_holds.take_retry(c, name, now, retry) is None:
                return Claim(found)
            if has_credit and found.reason == "no_credit":
                return Claim(found, retry=True, by_credit=True)
            return Claim(found, claim_due(c, name, now, 1, turn, normal_limit=1), retry=True)

        return unit

    def claimed(self, lane: ProviderLane, claim: Claim, epoch: int) -> list[Claimed]:
        """Act on what the lane's claim found; returns the messages to queue.

        ``epoch`` is the lane's ``hold_epoch`` when the claim was made: a hold this
        process began since then may not have been stored when the claim read the
        database, so its absence there means nothing yet."""
        found = claim.hold
        if found is None:
            if lane.hold is not None and lane.hold_stored and lane.hold_epoch == epoch:
                self._resume(lane, "lifted by another process")
            return claim.batch
        if lane.hold is None:
            self._hold_here(lane, found)
            log.warning("provider %s refuses every message (%s: %s): its lane holds,"
                        " messages stay queued", lane.name, found.reason, found.error)
        lane.hold, lane.hold_stored = found, True
        if claim.by_credit:
            self._spawn(self._retry_by_credit(lane))
        elif claim.retry:
            lane.retry_ids = {m.id for m in claim.batch}
        return claim.batch

    async def blocked(self, lane: ProviderLane, msg: Claimed, outcome: Outcome) -> None:
        """A submission came back refused until the provider's operator acts: hold the
        lane here at once, then in the database."""
        reason = outcome.blocked or "blocked"
        error = outcome.error or reason
        now = self.appliance.now_ms()
        first = lane.hold is None
        retry = self.retry_ms(outcome.retry_after_s)
        if first:  # an operator who fixes it at once need not wait a whole interval
            retry = min(retry, FIRST_RETRY_MS)
        lane.retry_ids.discard(msg.id)
        self._hold_here(lane, Hold(lane.name, reason, error, now, now + retry))
        if first:
            log.warning("provider %s refuses every message (%s: %s): its lane holds,"
                        " messages stay queued; trying again in %.0f s, then every %.0f s",
                        lane.name, reason, error, retry / 1000, self.retry_ms() / 1000)
        epoch = lane.hold_epoch
        try:
            stored = await self.appliance.store.writer.run(
                lambda c: provider_holds.hold(c, lane.name, reason, error, now, retry))
        except Exception:
            log.exception("provider %s: the hold could not be stored", lane.name)
            return
        if lane.hold is not None and lane.hold_epoch == epoch:
            lane.hold, lane.hold_stored = stored, True

    async def answered(self, lane: ProviderLane, msg: Claimed, outcome: Outcome) -> None:
        """A held lane's retry was answered with something other than a refusal of
        every message: the provider takes messages again (an answer that did not reach
        it proves nothing: the hold stays)."""
        if msg.id not in lane.retry_ids:
            return
        lane.retry_ids.discard(msg.id)
        if outcome.blocked is None and not outcome.unreached and lane.hold is not None:
            await self._lift(lane, "it answered a message")

    def _hold_here(self, lane: ProviderLane, hold: Hold) -> None:
        lane.hold, lane.hold_stored = hold, False
        lane.hold_epoch += 1
        lane.flusher.release(lane.drain())

    async def _retry_by_credit(self, lane: ProviderLane) -> None:
        credit = await self.credit.ask(lane.provider)
        if credit is not None and credit > 0 and lane.hold is not None:
            await self._lift(lane, f"its credit is {credit:g}")

    async def _lift(self, lane: ProviderLane, why: str) -> None:
        try:
            await self.appliance.store.writer.run(
                lambda c: provider_holds.lift(c, lane.name))
        except Exception:
            log.exception("provider %s: the hold could not be lifted", lane.name)
            return
        self._resume(lane, why)

    def _resume(self, lane: ProviderLane, why: str) -> None:
        if lane.hold is None:
            return
        log.warning("provider %s takes messages again (%s): its lane resumes", lane.name,
                    why)
        lane.hold, lane.hold_stored = None, False
        lane.retry_ids.clear()
        self.wake()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
