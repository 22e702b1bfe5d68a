"""Readiness: is this appliance able to do its job right now?

``/healthz`` only says the process answers. ``/readyz`` checks, each with a reason:

* ``database``: a tiny write unit commits within a few seconds (the writer is alive
  and the disk takes writes);
* ``storage``: the data dir's disk has at least ``[storage] min_free_bytes`` free
  (below it imports and campaigns are refused, see :mod:`appliance.disk`);
* ``scheduler``: every loop is running and none has spent over 15 minutes in one
  step;
* ``backup``: when scheduled backups are on, the last one succeeded and is not older
  than 1.25 × the interval (the ``backup_stale`` alert);
* ``smpp:NAME``, one per SMPP provider, *advisory*: whether its session is bound (since
  when, or why not). An unbound session does not make the appliance not ready: the API
  still accepts and stores messages, which wait (``RETRY``) until the session binds,
  and the HTTP providers still send. It is shown, with ``"advisory": true``, and
  ``appliance_smpp_bound`` in ``/metrics`` is what to alert on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from appliance.disk import below_reserve, free_bytes
from appliance.ops.observability.alerts import backup_alert
from appliance.providers.registry import Providers
from appliance.runtime import Runtime
from appliance.store.connection import Connection

WRITE_TIMEOUT_S = 5.0
STUCK_STEP_S = 900.0
PROBE_KEY = "ops.ready_probe"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    advisory: bool = False  # shown, but does not make the appliance not ready


def _probe(now_ms: int) -> Any:
    def unit(conn: Connection) -> None:
        conn.execute(
            "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, '', ?)"
            " ON CONFLICT (key) DO UPDATE SET updated_at = excluded.updated_at",
            (PROBE_KEY, now_ms))
    return unit


async def database_check(appliance: Runtime) -> Check:
    try:
        await asyncio.wait_for(appliance.store.writer.run(_probe(appliance.now_ms())),
                               WRITE_TIMEOUT_S)
    except TimeoutError:
        return Check("database", False, f"a write did not commit within {WRITE_TIMEOUT_S:g} s")
    except Exception as exc:
        return Check("database", False, f"a write failed: {type(exc).__name__}: {exc}")
    return Check("database", True, "writable")


def storage_check(appliance: Runtime) -> Check:
    refusal = below_reserve(appliance.settings)
    if refusal is not None:
        return Check("storage", False, refusal)
    free = free_bytes(appliance.settings.data_dir)
    return Check("storage", True, f"{free} bytes free (reserve"
                                  f" {appliance.settings.storage.min_free_bytes})")


def scheduler_check(appliance: Runtime) -> Check:
    scheduler = appliance.scheduler
    loops = scheduler.heartbeats()
    if not loops:
        return Check("scheduler", False, "no loops running")
    ended = scheduler.ended()
    if ended:
        return Check("scheduler", False, f"loops ended: {', '.join(sorted(ended))}")
    stuck = {name: s for name, s in scheduler.busy().items() if s > STUCK_STEP_S}
    if stuck:
        names = ", ".join(f"{n} ({s:.0f} s)" for n, s in sorted(stuck.items()))
        return Check("scheduler", False, f"loops stuck in one step for over"
                                         f" {STUCK_STEP_S:g} s: {names}")
    return Check("scheduler", True, f"{len(loops)} loops alive")


def backup_check(appliance: Runtime) -> Check:
    alert = backup_alert(appliance.settings, appliance.now_ms())
    return Check("backup", not alert.firing, alert.message)


def session_checks(providers: Providers) -> list[Check]:
    """One advisory check per provider whose transport is a session, whatever protocol
    it speaks, named ``KIND:NAME`` (``smpp:smsc``)."""
    out = []
    for name, (provider, transport) in sorted(providers.sessions().items()):
        st = transport.state()
        if st.bound:
            since = datetime.fromtimestamp((st.bound_since_ms or 0) / 1000, UTC)
            detail = (f"bound since {since.isoformat(timespec='seconds')}; window"
                      f" {st.window_in_use}/{st.window}")
        else:
            why = "; ".join(f"{ls.mode}: {ls.last_error}" for ls in st.links if ls.last_error)
            detail = "not bound" + (f" ({why})" if why else " (binding)") + \
                "; messages wait until it binds"
        out.append(Check(f"{provider.kind}:{name}", st.bound, detail, advisory=True))
    return out


async def readiness(appliance: Runtime, providers: Providers) -> list[Check]:
    return [await database_check(appliance), storage_check(appliance),
            scheduler_check(appliance), backup_check(appliance), *session_checks(providers)]
