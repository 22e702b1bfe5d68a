"""Several processes on PostgreSQL: taking over the sends of a process that died.

The sender settles what its own process left ``SENDING`` once, at start. With several
processes on one database, a process that dies (``kill -9``, a lost machine) leaves its
reserved and in-flight messages behind while the others go on; this loop, in every
process, settles them from time to time (:func:`appliance.sending.recovery.recover_orphans`):
reservations older than a minute are given back (sent in their turn by whoever claims
them, once), and what a dead process was sending becomes ``UNCERTAIN`` (or ``RETRY``
where the provider drops repeats of our ref), never resent, as after a restart. It also
keeps this process's own liveness lock (:mod:`appliance.store.owner`), taking it back
after a lost connection. Installed on PostgreSQL only: on SQLite the one process settles
its own at start.
"""

from __future__ import annotations

import logging
from functools import partial

import anyio.to_thread

from appliance.providers.registry import Providers
from appliance.runtime import Runtime
from appliance.sending.recovery import recover_orphans

LOOP = "orphans"
INTERVAL_S = 2.0
log = logging.getLogger("appliance.sender")


class Orphans:
    def __init__(self, appliance: Runtime, providers: Providers) -> None:
        self.appliance = appliance
        self.providers = providers
        self.released = 0
        self.recovered = 0

    async def step(self) -> float | None:
        liveness = self.appliance.liveness
        if liveness is not None and not await anyio.to_thread.run_sync(liveness.try_lead):
            log.warning("this process's lock on PostgreSQL is lost; taking it again")
            return None
        for name, provider in self.providers.all().items():
            now = self.appliance.now_ms()
            dedupes, per_part = provider.dedupes_on_ref, provider.reports_per_part
            released, recovered = await self.appliance.store.writer.run(
                partial(recover_orphans, provider=name, now_ms=now, dedupes_on_ref=dedupes,
                        reports_per_part=per_part))
            self.released += released
            self.recovered += recovered
            if recovered:
                log.warning("%s messages of provider %s were being sent by a process that"
                            " stopped; marked %s", recovered, name,
                            "RETRY" if dedupes else "UNCERTAIN")
        return None


def install(runtime: Runtime, providers: Providers) -> Orphans | None:
    """On PostgreSQL, the loop that takes back what a stopped process was sending."""
    if not runtime.on_postgresql:
        return None
    orphans = Orphans(runtime, providers)
    runtime.scheduler.add(LOOP, orphans.step, interval_s=INTERVAL_S)
    return orphans
