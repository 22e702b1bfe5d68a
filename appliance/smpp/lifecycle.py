"""The SMPP sessions of an appliance: started with the sender, stopped with it (SMPP-1).

:func:`install` (from :func:`appliance.server.assemble`, after the sender) finds every
provider whose transport is an SMPP session, gives it a :class:`SessionIntake` (where its
``deliver_sm`` are stored) and the id evidence kept from earlier runs, and registers
the ``smpp`` loop. The loop's first step starts the sessions (bind, ``enquire_link``,
reconnect with backoff, a log line per state change); each step after:

- keeps the id evidence ``auto`` learnt (:mod:`appliance.smpp.id_memory`), and when it
  changes re-files what was stored under keys it read wrongly before; and how the
  SMSC writes its ids, for ``query_sm`` after a restart;
- records late ``submit_sm_resp`` ids for their UNCERTAIN parts
  (:func:`appliance.smpp.uncertain.record_late_id`), again while their outcome is
  not recorded yet, for up to :data:`LATE_TRY_S`;
- binds receipts whose id we never learnt to the UNCERTAIN part they are about
  (:func:`appliance.smpp.uncertain.match_orphans`): receipts waiting longer than a
  ``submit_sm_resp`` may take, new ones each step and all of them for a few steps
  after segments were reported UNCERTAIN (and after a start: the sender marks what a
  crash left in flight UNCERTAIN).

The sessions start stopping just before the sender waits for its batches (their
``on_stop`` runs first): a segment not written yet is RETRY at once, the answers still
due get a quarter of ``shutdown_timeout_s`` (at most 5 s) to arrive and the segments
still unanswered then are UNCERTAIN, what came in is stored, and each session unbinds.
So the sender's batches in flight complete while the sessions stop, and
:meth:`appliance.sending.sender.Sender.close` records them, then waits for the sessions
to be down (closing the transports), within the shutdown budget.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import TYPE_CHECKING

from appliance.inbound.store import InboundRules
from appliance.providers.registry import Providers
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.smpp.id_memory import (
    load_evidence,
    load_shape,
    rekey,
    save_evidence,
    save_shape,
)
from appliance.smpp.ids import IdEvidence, IdShape

if TYPE_CHECKING:
    from appliance.smpp.intake import SessionIntake
    from appliance.smpp.transport import SmppTransport
    from appliance.smpp.uncertain import Swept

log = logging.getLogger("appliance.smpp")
LOOP = "smpp"
STEP_S = 1.0
LATE_TRY_S = 300.0  # a late id whose outcome is still not recorded is given up after this
SWEEPS_AFTER_UNCERTAIN = 3  # full orphan sweeps after segments were reported UNCERTAIN
GRACE_EXTRA_S = 2.0
# Keys read wrongly are re-filed every step for this many response timeouts (at least
# REKEY_MIN_S each): outcomes and receipts keyed before the change may still be on
# their way to the database.
REKEY_AGAIN_FACTOR = 3
REKEY_MIN_S = 10.0  # beyond the response timeout, before a receipt counts as an orphan


class RunningSession:
    """One provider's session as the appliance runs it."""

    def __init__(self, name: str, transport: SmppTransport, intake: SessionIntake) -> None:
        self.name = name
        self.transport = transport
        self.intake = intake
        self.totals = transport.totals
        self.saved = IdEvidence()
        self.saved_shape = IdShape()
        # Full passes over every orphan still due (a start: what a crash left UNCERTAIN),
        # and where the one under way has got to; ``cursor``: the newest orphan looked at.
        # Keys ``auto`` read wrongly before the SMSC showed a letter, re-filed until then.
        self.rekeys: list[tuple[str, str]] = []
        self.rekey_until = 0.0
        self.passes_due = SWEEPS_AFTER_UNCERTAIN
        self.pass_at: int | None = 0
        self.cursor = 0


class SmppSessions:
    """Every SMPP provider's session, and the ``smpp`` loop over them."""

    def __init__(self, appliance: Runtime, providers: Providers) -> None:
        self.appliance = appliance
        self.sessions: dict[str, RunningSession] = {}
        self.started = False
        rules = InboundRules.from_settings(appliance.settings)
        store = appliance.store
        for name, (_, transport) in providers.sessions(build=True).items():
            # The protocol's modules (the PDUs, smpp34) only where a session runs: a
            # server without one answers its first request without them.
            from appliance.smpp.intake import SessionIntake
            from appliance.smpp.transport import SmppTransport

            if not isinstance(transport, SmppTransport):
                continue
            intake = SessionIntake(name, store.writer, rules, appliance.now_ms,
                                   on_work=self._work_came)
            kept = store.readers.call(functools.partial(load_evidence, provider=name))
            shape = store.readers.call(functools.partial(load_shape, provider=name))
            transport.attach(intake, kept, shape)
            session = RunningSession(name, transport, intake)
            session.saved = dataclasses.replace(kept)
            session.saved_shape = dataclasses.replace(shape)
            self.sessions[name] = session
        # The loop runs only when there is a session to keep.
        self.wake: Wake | None = (appliance.scheduler.add(LOOP, self.step, interval_s=STEP_S)
                                  if self.sessions else None)

    def _work_came(self) -> None:
        """A session's intake has work for the loop (only sessions call it: the loop is
        registered whenever there is one)."""
        assert self.wake is not None
        self.wake()

    async def step(self) -> float | None:
        if not self.started:
            self.started = True
            for s in self.sessions.values():
                await s.transport.start()
        for s in self.sessions.values():
            await self._keep_evidence(s)
            await self._rekey(s)
            await self._record_late(s)
            await self._sweep(s)
        return STEP_S

    async def _keep_evidence(self, s: RunningSession) -> None:
        shape = s.transport.session.ids.shape
        if shape != s.saved_shape:
            kept_shape = dataclasses.replace(shape)
            at = self.appliance.now_ms()
            await self.appliance.store.writer.run(
                lambda c: save_shape(c, s.name, kept_shape, at))
            s.saved_shape = kept_shape
        now = s.transport.evidence
        if now == s.saved:
            return
        kept = dataclasses.replace(now)
        stamp = self.appliance.now_ms()
        await self.appliance.store.writer.run(
            lambda c: save_evidence(c, s.name, kept, stamp))
        s.saved = kept
        log.info("smpp %s: ids read as hexadecimal from now on (responses: %s, receipt"
                 " texts: %s)", s.name, kept.submit_hex, kept.text_hex)

    async def _rekey(self, s: RunningSession) -> None:
        fresh = s.transport.session.ids.corrections()
        if fresh:
            s.rekeys = sorted(set(s.rekeys) | set(fresh))
            s.rekey_until = time.monotonic() + REKEY_AGAIN_FACTOR * max(
                REKEY_MIN_S, s.transport.settings.response_timeout_s)
            log.info("smpp %s: %d ids read as decimal before the SMSC showed hexadecimal"
                     " ids; filing them under their hexadecimal value", s.name, len(fresh))
        if not s.rekeys:
            return
        pairs, now = list(s.rekeys), self.appliance.now_ms()
        await self.appliance.store.writer.run(
            functools.partial(rekey, provider=s.name, pairs=pairs, now_ms=now))
        if time.monotonic() > s.rekey_until:
            s.rekeys = []

    async def _record_late(self, s: RunningSession) -> None:
        pending = s.intake.pending
        if not pending.late:
            return
        from appliance.smpp.uncertain import record_late_id

        todo, pending.late = pending.late, []
        now = self.appliance.now_ms()
        kept = []
        for since, late in todo:
            verdict = await self.appliance.store.writer.run(
                functools.partial(record_late_id, provider=s.name, late=late, now_ms=now))
            if verdict == "recorded":
                s.totals.late_recorded += 1
                log.info("smpp %s: late id %s recorded for %s part %d", s.name,
                         late.message_id, late.ref, late.part)
            elif verdict == "later" and time.monotonic() - since < LATE_TRY_S:
                kept.append((since, late))
            elif verdict == "later":
                s.totals.late_given_up += 1
                log.warning("smpp %s: late id %s for %s part %d not recorded: the outcome"
                            " was never recorded", s.name, late.message_id, late.ref,
                            late.part)
        pending.late = kept + pending.late

    async def _sweep(self, s: RunningSession) -> None:
        if s.intake.pending.uncertain_seen:
            s.intake.pending.uncertain_seen = 0
            s.passes_due = SWEEPS_AFTER_UNCERTAIN
            if s.pass_at is None:
                s.pass_at = 0
        from appliance.smpp.uncertain import ORPHAN_BATCH

        settings = s.transport.settings
        now = self.appliance.now_ms()
        before = now - int((settings.response_timeout_s + GRACE_EXTRA_S) * 1000)
        if s.pass_at is not None:
            at = s.pass_at
            swept = await self._match(s, now, before, at)
            if swept is None or swept.looked < ORPHAN_BATCH:  # the pass reached the end
                s.passes_due -= 1
                s.pass_at = 0 if s.passes_due > 0 else None
            else:
                s.pass_at = max(at, swept.last_id)
        swept = await self._match(s, now, before, s.cursor)
        if swept is not None:
            s.cursor = swept.last_id

    async def _match(self, s: RunningSession, now: int, before: int,
                     after: int) -> Swept | None:
        """One batch of orphans after ``after``; ``None`` when there is none (read only)."""
        from appliance.smpp.uncertain import match_orphans, orphans

        store = self.appliance.store
        if not await store.readers.run(lambda c: orphans(c, s.name, before, after, 1)):
            return None
        region = self.appliance.settings.imports.default_region
        swept: Swept = await store.writer.run(
            lambda c: match_orphans(c, s.name, region, now, before, after))
        s.totals.orphans_matched += swept.matched
        s.totals.orphans_ambiguous += swept.ambiguous
        if swept.matched:
            log.info("smpp %s: %d receipts whose id was never answered matched to their"
                     " UNCERTAIN part", s.name, swept.matched)
        return swept


    async def stop(self) -> None:
        """Start stopping every session, before the sender waits for its last batches
        (which the sessions' stop completes); the sender's close of the transports then
        waits for the sessions to have unbound."""
        from appliance.smpp.transport import STOP_BUDGET_S

        budget = min(STOP_BUDGET_S, self.appliance.settings.shutdown_timeout_s / 4)
        for s in self.sessions.values():
            s.transport.stop_budget_s = budget
            s.transport.begin_close()


def install(runtime: Runtime, providers: Providers) -> SmppSessions:
    """Attach the SMPP sessions and register their loop (none configured: no loop).
    Install after the sender: the sessions' ``on_stop`` must run before the sender's."""
    sessions = SmppSessions(runtime, providers)
    if sessions.sessions:
        runtime.on_stop(sessions.stop)
    return sessions
