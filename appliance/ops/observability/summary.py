"""One summary of report health: what ``/api/stats`` answers, the dashboard shows and
``appliance doctor`` prints (DLR-9, 10, 11).

The settled window (``[now - window, now - settle]``) is the number to defend: its
reports have had time to arrive. ``live`` is the same question asked of the messages
created since (``[now - settle, now]``), with ``still_due`` of them still within their
delivery window, so a fresh appliance (or the demo) shows figures moving at once;
``live_by_hour`` are its hours, for the chart. One read unit, so one snapshot.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from appliance.clock import iso
from appliance.config import Settings
from appliance.ops.observability.alerts import ops_alerts
from appliance.reports.alerts import alerts_from, evaluate
from appliance.reports.coverage import (
    as_json,
    coverage_of,
    inbox_health,
    iys_refused,
    live_by_hour,
    open_by_hour,
    overdue,
)
from appliance.store.connection import Connection


def summary(conn: Connection, settings: Settings, now_ms: int,
            account_id: int | None = None) -> dict[str, Any]:
    """Coverage, delivery rate, open-by-hour and overdue (of one account, or all), the
    inbox and the alerts (the appliance's) as JSON-ready data (a read unit)."""
    a = settings.alerts
    hours = open_by_hour(conn, now_ms, a.coverage_window_hours, a.coverage_settle_hours,
                         account_id)
    cov = coverage_of(hours, now_ms, a.coverage_window_hours, a.coverage_settle_hours)
    live, live_hours = live_by_hour(conn, now_ms, a.coverage_settle_hours,
                                    settings.sending.delivery_window_hours, account_id)
    health = inbox_health(conn, now_ms)
    late = overdue(conn, now_ms, settings.sending.delivery_window_hours,
                   a.coverage_window_hours, account_id)
    alerts = (alerts_from(cov, health, late, settings) if account_id is None
              else evaluate(conn, settings, now_ms))
    alerts += ops_alerts(conn, settings, now_ms, account_id)  # backup_stale, import_stuck
    return {
        "coverage_pct": cov.coverage_pct,
        "delivered_pct": cov.delivered_pct,
        "window": {
            "from": iso(cov.window_start),
            "to": iso(cov.window_end),
            "total": cov.total,
            "finalised": cov.finalised,
            "delivered": cov.delivered,
        },
        "live": live.as_json(),
        "inbox": as_json(health),
        "overdue": late,
        "iys_refused": iys_refused(conn, now_ms - int(a.coverage_window_hours * 3_600_000),
                                   account_id),
        "open_by_hour": [
            {"hour": iso(h.hour), "still_open": h.still_open, "total": h.total}
            for h in hours
        ],
        "live_window": {"from": iso(live.start), "to": iso(live.end)},
        "live_by_hour": [
            {"hour": iso(h.hour), "still_open": h.still_open, "total": h.total}
            for h in live_hours
        ],
        "alerts": [asdict(x) for x in alerts],
        "at": iso(now_ms),
    }
