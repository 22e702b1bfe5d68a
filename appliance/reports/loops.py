"""Registers the report loops with the scheduler: reconciler, cut-off, alerts, reparse."""

from __future__ import annotations

from appliance.reports import alerts, cutoff, reconciler, reparse
from appliance.service import Appliance


def install(appliance: Appliance) -> None:
    rec = reconciler.Reconciler(appliance)
    cut = cutoff.CutOff(appliance)
    watch = alerts.AlertWatch(appliance)
    appliance.scheduler.add(reconciler.LOOP, rec.step, interval_s=reconciler.POLL_S)
    appliance.scheduler.add(cutoff.LOOP, cut.step, interval_s=cut.interval_s)
    appliance.scheduler.add(alerts.LOOP, watch.step,
                            interval_s=appliance.settings.alerts.check_interval_s)
    again = reparse.Reparser(appliance)
    appliance.scheduler.add(reparse.LOOP, again.step, interval_s=reparse.INTERVAL_S)
