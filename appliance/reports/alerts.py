"""The three alerts (DLR-11), and the loop that watches them.

* ``coverage_low``: coverage over the rolling window is below ``[alerts]
  coverage_min_pct`` (a regression in our pipeline).
* ``inbox_stale``: the oldest unmatched report is older than ``inbox_oldest_max_s``
  (the submitted ref and the reported ref are not the same key).
* ``overdue``: more than ``overdue_max`` messages passed the delivery window without
  a final report (a provider went silent).

:func:`evaluate` computes them from the database (``appliance doctor`` and
``/api/stats`` use it directly). The ``alerts`` loop (:class:`AlertWatch`) evaluates
them every ``check_interval_s``, remembers each one's state in ``appliance_state``
and, when one starts or stops holding, logs it and POSTs it as JSON to
``webhook_url`` (if set). A notification that fails is tried again at the next check.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from appliance.clock import iso
from appliance.config import Settings
from appliance.outgoing_http import async_client
from appliance.reports.coverage import Coverage, InboxHealth, coverage, inbox_health, overdue
from appliance.runtime import Runtime
from appliance.store.connection import Connection

log = logging.getLogger("appliance.alerts")
LOOP = "alerts"
STATE_PREFIX = "alert."


@dataclass(frozen=True)
class Alert:
    name: str
    firing: bool
    value: float | None
    threshold: float
    message: str


def evaluate(conn: Connection, settings: Settings, now_ms: int) -> list[Alert]:
    """The three alerts as of ``now_ms`` (a read unit)."""
    a = settings.alerts
    return alerts_from(
        coverage(conn, now_ms, a.coverage_window_hours, a.coverage_settle_hours),
        inbox_health(conn, now_ms),
        overdue(conn, now_ms, settings.sending.delivery_window_hours, a.coverage_window_hours),
        settings)


def alerts_from(cov: Coverage, health: InboxHealth, late: int,
                settings: Settings) -> list[Alert]:
    """The three alerts from figures already read (appliance-wide ones)."""
    a = settings.alerts
    pct = cov.coverage_pct
    return [
        Alert("coverage_low", pct is not None and pct < a.coverage_min_pct, pct,
              a.coverage_min_pct,
              f"coverage {pct}% of {cov.total} messages (minimum {a.coverage_min_pct}%)"
              if pct is not None else "no messages in the coverage window"),
        inbox_alert(health, a.inbox_oldest_max_s),
        Alert("overdue", late > a.overdue_max, float(late), float(a.overdue_max),
              f"{late} messages past the delivery window without a final report"
              f" (maximum {a.overdue_max})"),
    ]


def inbox_alert(health: InboxHealth, limit_s: float) -> Alert:
    """``inbox_stale``; with nothing waiting its value is 0 (a number, as documented)
    and its message says so, rather than "oldest None s"."""
    age = health.oldest_age_s
    if age is None:
        return Alert("inbox_stale", False, 0.0, limit_s, f"{health.waiting} reports waiting")
    return Alert("inbox_stale", age > limit_s, age, limit_s,
                 f"{health.waiting} reports waiting, oldest {age:.0f} s"
                 f" (maximum {limit_s:g} s)")


def stored_states(conn: Connection) -> dict[str, bool]:
    """Whether each alert held at the last check (a read unit)."""
    out: dict[str, bool] = {}
    for key, value in conn.execute(
            "SELECT key, value FROM appliance_state WHERE key >= ? AND key < ?",
            (STATE_PREFIX, STATE_PREFIX + "\uffff")):
        try:
            out[str(key)[len(STATE_PREFIX):]] = bool(json.loads(str(value))["firing"])
        except (ValueError, KeyError, TypeError):
            continue
    return out


def store_state(conn: Connection, alert: Alert, now_ms: int) -> None:
    value = json.dumps({**asdict(alert), "since": now_ms})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at",
        (STATE_PREFIX + alert.name, value, now_ms))


# A read unit that evaluates a set of alerts: ``(conn, settings, now_ms) -> alerts``.
AlertSource = Callable[[Connection, Settings, int], list[Alert]]


class AlertWatch:
    """Evaluates the alerts of ``source`` (the three report alerts by default) and
    announces each change; any other set of alerts can reuse it with its own source."""

    def __init__(self, appliance: Runtime, source: AlertSource | None = None) -> None:
        self.appliance = appliance
        self.source: AlertSource = source or evaluate
        self.current: list[Alert] = []
        self.sent: int = 0

    async def notify(self, alert: Alert, now_ms: int) -> bool:
        url = self.appliance.settings.alerts.webhook_url
        if not url:
            return True
        payload: dict[str, Any] = {**asdict(alert), "at": iso(now_ms)}
        try:
            async with async_client(timeout=5.0) as client:
                response = await client.post(url, json=payload)
        except httpx.HTTPError as exc:
            log.warning("alert webhook failed: %s", exc)
            return False
        if response.status_code >= 300:
            log.warning("alert webhook answered %s", response.status_code)
            return False
        self.sent += 1
        return True

    async def step(self) -> float | None:
        store = self.appliance.store
        settings = self.appliance.settings
        now = self.appliance.now_ms()
        alerts = await store.readers.run(lambda c: self.source(c, settings, now))
        self.current = alerts
        before = await store.readers.run(stored_states)
        for alert in alerts:
            if before.get(alert.name, False) == alert.firing:
                continue
            if alert.firing:
                log.warning("alert %s: %s", alert.name, alert.message)
            else:
                log.info("alert %s cleared: %s", alert.name, alert.message)
            if await self.notify(alert, now):
                await store.writer.run(_storing(alert, now))
        return settings.alerts.check_interval_s


def _storing(alert: Alert, now_ms: int) -> Callable[[Connection], None]:
    return lambda conn: store_state(conn, alert, now_ms)
