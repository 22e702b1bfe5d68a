"""``appliance doctor``: the report diagnostics, readable in a terminal.

Reads the database through a read-only connection, in one read transaction, so it
works beside a running server and its figures agree with each other. Prints what
the dashboard shows, from the same read unit (:func:`appliance.ops.observability.summary.summary`):
the settled window's coverage beside delivery rate, the live figures of the last
hours, inbox health, overdue messages, open messages by hour of creation and the
alerts; the exit status is 1 when an alert holds (so cron and monitoring can use
it), 2 when there is no database.
"""

from __future__ import annotations

import json
from typing import Any

from appliance.clock import Clock
from appliance.config import Settings
from appliance.ops.observability.summary import summary
from appliance.store.readers import in_snapshot
from appliance.store.schema import open_connection


def render(data: dict[str, Any]) -> str:
    w = data["window"]
    live = data["live"]
    inbox = data["inbox"]
    lw = data["live_window"]
    lines = [
        f"window     {w['from']} .. {w['to']}  ({w['total']} messages, settled)",
        f"coverage   {_pct(data['coverage_pct'])}  ({w['finalised']} with a final report)",
        f"delivered  {_pct(data['delivered_pct'])}  ({w['delivered']} delivered)",
        f"live       {lw['from']} .. {lw['to']}  ({live['messages']} messages,"
        f" {live['still_due']} still due)",
        f" coverage  {_pct(live['coverage_pct'])}  ({live['finalised']} with a final report)",
        f" delivered {_pct(live['delivered_pct'])}",
        f"inbox      {inbox['waiting']} waiting, oldest "
        + ("-" if inbox["oldest_age_s"] is None else f"{inbox['oldest_age_s']:.0f} s")
        + f", {inbox['quarantined']} callbacks kept raw (unreadable)",
        f"overdue    {data['overdue']} past the delivery window without a final report",
        "",
        "hour of creation (UTC)    still_open     total",
    ]
    rows = [(r, " live") for r in data["live_by_hour"]] + [(r, "") for r in data["open_by_hour"]]
    for row, mark in rows[:24]:
        lines.append(f"{row['hour'][:16]:<24} {row['still_open']:>11} {row['total']:>9}{mark}")
    if not rows:
        lines.append("(no messages in the window)")
    lines.append("")
    for alert in data["alerts"]:
        mark = "ALERT" if alert["firing"] else "ok   "
        lines.append(f"{mark} {alert['name']:<13} {alert['message']}")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def run_doctor(settings: Settings, as_json: bool = False) -> tuple[int, str]:
    """(exit status, text to print)."""
    if settings.database_url:
        return _doctor_postgresql(settings, as_json)
    path = settings.db_path
    if not path.exists():
        return 2, f"no database at {path}: nothing to diagnose"
    conn = open_connection(str(path), readonly=True)
    try:
        now = Clock.from_env().now_ms()
        data = in_snapshot(conn, lambda c: summary(c, settings, now))
    finally:
        conn.close()
    text = json.dumps(data, indent=2) if as_json else render(data)
    return (1 if any(a["firing"] for a in data["alerts"]) else 0), text


def _doctor_postgresql(settings: Settings, as_json: bool) -> tuple[int, str]:
    from appliance.store import pg_store
    from appliance.store.errors import STORE_ERRORS
    from appliance.store.pg import PgConnection

    try:
        conn = PgConnection.connect(settings.database_url, application_name="appliance-doctor")
    except STORE_ERRORS as exc:
        return 2, f"cannot reach {pg_store.redacted(settings.database_url)}: {exc}"
    try:
        now = Clock.from_env().now_ms()
        data = pg_store.in_snapshot(conn, lambda c: summary(c, settings, now))
    finally:
        conn.close()
    text = json.dumps(data, indent=2) if as_json else render(data)
    return (1 if any(a["firing"] for a in data["alerts"]) else 0), text
