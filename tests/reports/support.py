"""What the report tests share: a real store, messages as the sender commits them,
and signed callbacks in the ``http`` provider's wire format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from appliance.providers.http_json import body_signature
from appliance.reports.inbox import InboxReport
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int

SECRET = "cb-secret-for-tests"
PROVIDER = "gw"


def add_account(conn: Connection, name: str = "acme") -> int:
    row = conn.execute(
        "INSERT INTO accounts (name, created_at) VALUES (?, 0) RETURNING id", (name,)
    ).fetchone()
    assert row is not None
    return as_int(row[0])


def add_message(conn: Connection, account_id: int, ref: str, state: str = "SUBMITTED",
                created_at: int = 0, submitted_at: int | None = 0,
                provider_msg_id: str | None = None, provider: str = PROVIDER) -> int:
    """A message row as the sender leaves it (a write unit)."""
    row = conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, next_attempt_at,"
        " provider_msg_id, created_at, updated_at, submitted_at)"
        " VALUES (?, ?, ?, '+905321234567', 'hi', ?, 0, ?, ?, ?, ?) RETURNING id",
        (ref, account_id, provider, state, provider_msg_id, created_at, created_at,
         submitted_at),
    ).fetchone()
    assert row is not None
    return as_int(row[0])


def add_due(conn: Connection, account_id: int, refs: tuple[str, ...], submitted_at: int,
            provider: str = "sim") -> None:
    """Messages submitted at ``submitted_at`` and not reported since (a write unit): the
    pull tests' messages whose first ask is due."""
    for ref in refs:
        add_message(conn, account_id, ref, submitted_at=submitted_at,
                    created_at=submitted_at, provider=provider)


def message(conn: Connection, ref: str) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM messages WHERE ref = ?", (ref,)).fetchone()
    assert row is not None, f"no message {ref}"
    return dict(zip(columns(conn, "messages"), row, strict=True))


def inbox_rows(conn: Connection, ref: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT * FROM report_inbox" + (" WHERE ref = ?" if ref is not None else "")
    names = columns(conn, "report_inbox")
    rows = conn.execute(sql + " ORDER BY id", (ref,) if ref is not None else ())
    return [dict(zip(names, r, strict=True)) for r in rows]


def columns(conn: Connection, table: str) -> list[str]:
    if dialect.of(conn).is_postgresql:
        return [str(r[0]) for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
            " AND table_schema = current_schema() ORDER BY ordinal_position", (table,))]
    return [str(r[0]) for r in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))]


def report(ref: str, state: str, at: int, status: str | None = None,
           provider_msg_id: str = "") -> InboxReport:
    return InboxReport(PROVIDER, ref, provider_msg_id, status or state.lower(), at, state)


def http_provider_config(path: Path, **extra: str) -> Path:
    """A config with one provider of kind ``http`` whose callbacks are signed."""
    lines = [f'[providers.{PROVIDER}]', 'kind = "http"', 'base_url = "http://127.0.0.1:9"',
             f'secret = "{SECRET}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def post_report(client: httpx.Client, payload: Any, secret: str = SECRET,
                provider: str = PROVIDER) -> httpx.Response:
    """POST a report the way the ``http`` provider does: raw JSON, HMAC-signed."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post(f"/callbacks/{provider}", content=body, headers={
        "Content-Type": "application/json", "X-Signature": body_signature(body, secret)})


def one(conn: Connection, sql: str, *args: object) -> tuple[Any, ...]:
    """The single row ``sql`` returns."""
    row = conn.execute(sql, args).fetchone()
    assert row is not None, sql
    return tuple(row)
