"""Registers the report loops with the scheduler: reconciler, cut-off, alerts, reparse,
and the folding of changed messages into the kept counts (``rollups``). With several
processes on PostgreSQL all but the reconciler run in one process at a time
(:meth:`appliance.runtime.Runtime.singleton`); the reconciler's units are guarded."""

from __future__ import annotations

from appliance.providers.registry import Providers
from appliance.reports import alerts, cutoff, reconciler, reparse
from appliance.runtime import Runtime
from appliance.store import rollups

ROLLUPS_LOOP = "rollups"
ROLLUPS_IDLE_S = 1.0


def install(appliance: Runtime, providers: Providers) -> None:
    rec = reconciler.Reconciler(appliance)
    cut = cutoff.CutOff(appliance)
    watch = alerts.AlertWatch(appliance)
    appliance.scheduler.add(reconciler.LOOP, rec.step, interval_s=reconciler.POLL_S)
    one = appliance.singleton  # on PostgreSQL: in one process at a time
    appliance.scheduler.add(cutoff.LOOP, one(cutoff.LOOP, cut.step), interval_s=cut.interval_s)
    appliance.scheduler.add(alerts.LOOP, one(alerts.LOOP, watch.step),
                            interval_s=appliance.settings.alerts.check_interval_s)
    again = reparse.Reparser(appliance, providers)
    appliance.scheduler.add(reparse.LOOP, one(reparse.LOOP, again.step),
                            interval_s=reparse.INTERVAL_S)

    async def fold() -> float | None:
        # Readers are exact without it; it keeps what they add in small.
        moved = await appliance.store.writer.run(rollups.fold)
        if moved >= rollups.FOLD_BATCH:
            return 0
        # PostgreSQL: the count rows of sessions that ended, into their keys' own rows.
        await appliance.store.writer.run(rollups.fold_stripes)
        return ROLLUPS_IDLE_S

    appliance.scheduler.add(ROLLUPS_LOOP, one(ROLLUPS_LOOP, fold), interval_s=ROLLUPS_IDLE_S)
