"""The operations alerts, beside the three of DLR-11 (:mod:`appliance.reports.alerts`).

* ``backup_stale``: scheduled backups are on (``[backup] interval_hours``) and the last
  good backup is older than 1.25 × the interval, or the last attempt failed.
* ``import_stuck``: an import job is ``RUNNING`` but has made no progress for
  ``[import] stuck_after_s``.
* ``outbox_stale``: status webhooks are on (OPS-5) and the oldest event some receiver
  (``[webhooks]``'s, or an account's own: TEAM-2) has not taken is older than ``[alerts]
  webhooks_oldest_max_s``; the message names each such receiver. An account's
  ``/api/stats`` has it for the account's own receiver only.
* ``provider_blocked``: a provider refuses every message until its operator acts (no
  credit, a header not registered, an address not allowed) and its lane holds.

:func:`ops_alerts` is a read unit returning the same :class:`Alert` shape as the
report alerts, so ``/api/stats``, metrics and the webhook treat all seven alike.
"""

from __future__ import annotations

from appliance.clock import iso
from appliance.config import Settings
from appliance.ops.backup.status import read_status
from appliance.reports.alerts import Alert
from appliance.sending.provider_holds import held
from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.webhooks.events import DEFAULT_RECEIVER
from appliance.webhooks.health import outbox_health
from appliance.webhooks.receivers import shown_receiver

BACKUP_GRACE = 1.25


def backup_threshold_s(settings: Settings) -> float:
    return settings.backup.interval_hours * 3600 * BACKUP_GRACE


def backup_alert(settings: Settings, now_ms: int) -> Alert:
    threshold = backup_threshold_s(settings)
    if settings.backup.interval_hours <= 0:
        return Alert("backup_stale", False, None, 0.0, "scheduled backups are off")
    if settings.database_url:
        return Alert("backup_stale", False, None, 0.0,
                     "the data is in PostgreSQL, whose backups are its own")
    status = read_status(settings.data_dir)
    age = status.age_s(now_ms)
    failed = status.last_error_at is not None and (
        status.last_ok_at is None or status.last_error_at > status.last_ok_at)
    if failed:
        return Alert("backup_stale", True, age, threshold,
                     f"the last backup failed: {status.last_error}")
    if age is None:
        return Alert("backup_stale", False, None, threshold, "no backup taken yet")
    return Alert("backup_stale", age > threshold, round(age, 1), threshold,
                 f"last good backup {age:.0f} s ago (maximum {threshold:g} s)")


def stuck_imports(conn: Connection, settings: Settings, now_ms: int) -> list[int]:
    cutoff = now_ms - int(settings.imports.stuck_after_s * 1000)
    return [as_int(r[0]) for r in conn.execute(
        "SELECT id FROM import_jobs WHERE state = 'RUNNING' AND updated_at < ? ORDER BY id",
        (cutoff,))]


def import_alert(conn: Connection, settings: Settings, now_ms: int) -> Alert:
    stuck = stuck_imports(conn, settings, now_ms)
    limit = settings.imports.stuck_after_s
    if not stuck:
        return Alert("import_stuck", False, 0.0, limit, "no import job is stuck")
    shown = ", ".join(str(i) for i in stuck[:10]) + (" …" if len(stuck) > 10 else "")
    return Alert("import_stuck", True, float(len(stuck)), limit,
                 f"{len(stuck)} running import job(s) without progress for {limit:g} s:"
                 f" {shown}")


def _receivers(conn: Connection, settings: Settings,
               account_id: int | None) -> list[tuple[int, str]]:
    """The receivers events are written for, with the name an alert gives each: every
    one, or (``account_id``) only the one the account's events go to."""
    default = [(DEFAULT_RECEIVER, "the [webhooks] receiver")] \
        if settings.webhooks.configured else []
    if account_id is not None:
        shown = shown_receiver(conn, account_id)
        return default if shown == DEFAULT_RECEIVER else [(shown, "this account's receiver")]
    return default + [(as_int(r[0]), "account " + str(r[1]) + "'s receiver")
                      for r in conn.execute(
                          "SELECT r.account_id, a.name FROM account_receivers r"
                          " JOIN accounts a ON a.id = r.account_id ORDER BY a.name")]


def outbox_alert(conn: Connection, settings: Settings, now_ms: int,
                 account_id: int | None = None) -> Alert:
    """``outbox_stale``, per receiver (TEAM-2): it holds while some receiver's oldest
    waiting event is older than the limit, and names each such receiver; the value is
    the oldest wait of any. For an account (its ``/api/stats``), only its own receiver
    (or ``[webhooks]``, when it has none) is looked at: another account's receiver, and
    its name, are not the caller's to see."""
    limit = settings.alerts.webhooks_oldest_max_s
    receivers = _receivers(conn, settings, account_id)
    if not receivers:
        return Alert("outbox_stale", False, None, limit, "status webhooks are off")
    waiting = [(name, h) for key, name in receivers
               if (h := outbox_health(conn, now_ms, key)).oldest_waiting_age_s is not None]
    if not waiting:
        return Alert("outbox_stale", False, 0.0, limit,
                     "every status event was taken by its receiver")
    oldest = max(h.oldest_waiting_age_s or 0.0 for _, h in waiting)
    stale = [(n, h) for n, h in waiting if (h.oldest_waiting_age_s or 0.0) > limit]
    shown = stale or [max(waiting, key=lambda w: w[1].oldest_waiting_age_s or 0.0)]
    message = "; ".join(
        f"{name}: {h.waiting} status events waiting, oldest {h.oldest_waiting_age_s:.0f} s"
        f" (maximum {limit:g} s)" + (f"; last error: {h.last_error}" if h.last_error else "")
        for name, h in shown)
    return Alert("outbox_stale", bool(stale), oldest, limit, message)


def blocked_alert(conn: Connection, settings: Settings, now_ms: int) -> Alert:
    """``provider_blocked``: a configured provider refuses every message until its
    operator acts, and its lane holds (:mod:`appliance.sending.provider_holds`); the
    message names each such provider and the reason. The value is how many."""
    holds = [h for name, h in sorted(held(conn).items()) if name in settings.providers]
    if not holds:
        return Alert("provider_blocked", False, 0.0, 0.0,
                     "every provider takes messages")
    shown = "; ".join(
        f"provider {h.provider} held since {iso(h.since_ms)}: {h.reason} ({h.error}),"
        f" next try in {max(0, h.next_try_ms - now_ms) / 1000:.0f} s" for h in holds)
    return Alert("provider_blocked", True, float(len(holds)), 0.0, shown)


def ops_alerts(conn: Connection, settings: Settings, now_ms: int,
               account_id: int | None = None) -> list[Alert]:
    """``backup_stale``, ``import_stuck``, ``outbox_stale`` and ``provider_blocked`` as
    of ``now_ms`` (a read unit); ``outbox_stale`` of the account's receiver only when
    ``account_id`` is given."""
    return [backup_alert(settings, now_ms), import_alert(conn, settings, now_ms),
            outbox_alert(conn, settings, now_ms, account_id),
            blocked_alert(conn, settings, now_ms)]
