"""Held lanes: a provider that refuses every message until its operator acts (ROUTE-1).

No credit, a sender header not registered, an address not allow-listed: the provider
answers every message the same way (:attr:`appliance.providers.outcome.Outcome.blocked`).
Burning the queue on it would end every message ``REJECTED`` for a reason that is the
account's, not the message's; instead the provider's lane *holds*: its messages stay
queued, attempts not counted, and it tries again every ``[sending] blocked_retry_s``.

The hold is a row of ``appliance_state`` (key ``provider_hold.<provider>``, JSON), not
a process's memory, so that with several processes on one PostgreSQL database every
sender holds that provider, one alert (``provider_blocked``) names it whichever process
met the refusal, a restart keeps holding, and one process at a time tries again
(:func:`take_retry` locks the row): the first to find the retry due moves it on and
tries; the others keep holding until the row is gone (:func:`lift`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection

PREFIX = "provider_hold."


@dataclass(frozen=True)
class Hold:
    """A provider's lane held: why (one of ``BLOCKED_REASONS``), the provider's own
    words, since when, and when it is tried again (epoch ms)."""

    provider: str
    reason: str
    error: str
    since_ms: int
    next_try_ms: int


def _key(provider: str) -> str:
    return PREFIX + provider


def _of(provider: str, value: Any) -> Hold | None:
    try:
        data = json.loads(str(value))
        return Hold(provider, str(data["reason"]), str(data["error"]), int(data["since_ms"]),
                    int(data["next_try_ms"]))
    except (ValueError, KeyError, TypeError):
        return None


def _write(conn: Connection, hold: Hold, now_ms: int) -> None:
    value = json.dumps({k: v for k, v in asdict(hold).items() if k != "provider"})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at", (_key(hold.provider), value, now_ms))


def _locked(conn: Connection, provider: str) -> Hold | None:
    """The provider's hold, its row locked until the unit ends (on PostgreSQL)."""
    row = conn.execute("SELECT value FROM appliance_state WHERE key = ?"
                       f"{dialect.of(conn).for_update}", (_key(provider),)).fetchone()
    return None if row is None else _of(provider, row[0])


def hold(conn: Connection, provider: str, reason: str, error: str, now_ms: int,
         retry_ms: int) -> Hold:
    """Hold ``provider``'s lane (a write unit): since the first refusal of this hold,
    tried again ``retry_ms`` from now."""
    found = _locked(conn, provider)
    since = found.since_ms if found is not None else now_ms
    held = Hold(provider, reason, error, since, now_ms + retry_ms)
    _write(conn, held, now_ms)
    return held


def held(conn: Connection) -> dict[str, Hold]:
    """Every held provider, by name (a read unit, or part of a write unit)."""
    out: dict[str, Hold] = {}
    for key, value in conn.execute(
            "SELECT key, value FROM appliance_state WHERE key >= ? AND key < ?",
            (PREFIX, PREFIX + "\uffff")):
        name = str(key)[len(PREFIX):]
        found = _of(name, value)
        if found is not None:
            out[name] = found
    return out


def take_retry(conn: Connection, provider: str, now_ms: int, retry_ms: int) -> Hold | None:
    """The hold, when its retry is due: moved on by ``retry_ms`` so that no other
    process tries at the same time (a write unit part). ``None`` when not held or not
    due yet."""
    found = _locked(conn, provider)
    if found is None or found.next_try_ms > now_ms:
        return None
    _write(conn, Hold(provider, found.reason, found.error, found.since_ms,
                      now_ms + retry_ms), now_ms)
    return found


def lift(conn: Connection, provider: str) -> bool:
    """The provider takes messages again (a write unit): its hold is gone."""
    conn.execute("DELETE FROM appliance_state WHERE key = ?", (_key(provider),))
    return conn.changes() > 0
