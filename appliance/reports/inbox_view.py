"""Reading the report inbox for people: what waits, per provider, oldest first.

Read units for the console's inbox page. The inbox belongs to the appliance, not to
an account: a report that matched no message carries nothing that says whose it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int


@dataclass(frozen=True)
class WaitingReport:
    id: int
    provider: str
    ref: str
    provider_msg_id: str
    status: str
    state: str
    reported_at: int
    received_at: int
    attempts: int
    next_try_at: int
    repeats: int


@dataclass(frozen=True)
class ProviderWaiting:
    provider: str
    waiting: int
    oldest_received_at: int


def waiting_by_provider(conn: Connection) -> list[ProviderWaiting]:
    # From the partial index of the waiting ones: grouped by provider, SQLite (without
    # statistics) read every report kept, applied or not, through the provider's index.
    waiting = dialect.of(conn).indexed_by("report_inbox_waiting_since")
    return [ProviderWaiting(str(r[0]), as_int(r[1]), as_int(r[2])) for r in conn.execute(
        f"SELECT provider, count(*), min(received_at) FROM report_inbox{waiting}"
        " WHERE applied_at IS NULL GROUP BY provider ORDER BY provider")]


def waiting_reports(conn: Connection, provider: str | None = None, limit: int = 200,
                    newest_first: bool = False) -> list[WaitingReport]:
    """Reports waiting for their message, oldest (or newest) received first."""
    where, args = "applied_at IS NULL", []
    if provider:
        where += " AND provider = ?"
        args.append(provider)
    order = "DESC" if newest_first else "ASC"
    rows: list[Any] = conn.execute(
        "SELECT id, provider, ref, provider_msg_id, status, state, reported_at, received_at,"
        f" attempts, next_try_at, repeats FROM report_inbox WHERE {where}"
        f" ORDER BY received_at {order}, id {order} LIMIT ?", (*args, limit)).fetchall()
    return [WaitingReport(*r) for r in rows]
