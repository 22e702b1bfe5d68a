"""Each account its own webhook receiver (TEAM-2), in the store.

An account with a receiver (``appliance account webhook NAME --url URL``) has its events
(its messages' status, the inbound messages listed to it) written for that receiver
only, and signed with its secret, whatever ``[webhooks]`` says; an account without one
uses the ``[webhooks]`` receiver while it is configured. Receivers are numbered: ``0``
the ``[webhooks]`` one (its row is ``webhook_receiver``), an account's by the account's
id (``account_receivers``); each row keeps that receiver's delivery health, so one
receiver's backoff is its own.

Setting a receiver switches the outbox's triggers on (the next state change of the
account's messages is an event, even with ``[webhooks]`` off). A new URL starts with a
clean backoff, the same one keeps where it was. Clearing it hands the account's waiting
events to the ``[webhooks]`` receiver (where the account's events go from then on:
delivered while ``[webhooks]`` is configured, else kept waiting, never dropped).

Every function here is a read unit or a write unit, or a part of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.webhooks import triggers
from appliance.webhooks.events import DEFAULT_RECEIVER

MAX_URL_CHARS = 2000
MAX_SECRET_CHARS = 500


@dataclass(frozen=True)
class Receiver:
    """Where a receiver's events go: its URL and the secret that signs them."""

    key: int  # DEFAULT_RECEIVER, or the account's id
    url: str
    secret: str


@dataclass(frozen=True)
class HealthRow:
    """The row a receiver's delivery health is kept in: ``UPDATE {table} SET ...
    WHERE {where}`` with ``args``."""

    table: str
    where: str
    args: tuple[Any, ...]


def health_row(receiver: int) -> HealthRow:
    if receiver == DEFAULT_RECEIVER:
        return HealthRow("webhook_receiver", "id = 1", ())
    return HealthRow("account_receivers", "account_id = ?", (receiver,))


def shown_url(url: str | None) -> str:
    """A receiver's URL without what may be a credential (password, query)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a receiver's URL, or ``None``."""
    if len(url) > MAX_URL_CHARS:
        return f"is longer than {MAX_URL_CHARS} characters"
    if any(c.isspace() for c in url):
        return "has spaces in it"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        return f"is no URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    return None


def secret_problem(secret: str) -> str | None:
    """Why ``secret`` cannot sign a receiver's events, or ``None``."""
    if not secret.strip():
        return "the secret is empty"
    if len(secret) > MAX_SECRET_CHARS:
        return f"the secret is longer than {MAX_SECRET_CHARS} characters"
    return None


def set_account_receiver(conn: Connection, account_id: int, url: str, secret: str,
                         now_ms: int) -> None:
    """Give the account its own receiver, or a new URL or secret (a write unit); the
    outbox's triggers are switched on in the same unit. Raises ``ValueError`` for a URL
    or secret that cannot be one."""
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(f"--url {url!r} {problem}")
    problem = secret_problem(secret)
    if problem is not None:
        raise ValueError(problem)
    conn.execute(
        "INSERT INTO account_receivers (account_id, url, secret, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id) DO UPDATE SET"
        " consecutive_failures = CASE WHEN account_receivers.url = excluded.url"
        "  THEN account_receivers.consecutive_failures ELSE 0 END,"
        " paused_until = CASE WHEN account_receivers.url = excluded.url"
        "  THEN account_receivers.paused_until ELSE 0 END,"
        " url = excluded.url, secret = excluded.secret, updated_at = excluded.updated_at",
        (account_id, url, secret, now_ms, now_ms))
    triggers.switch(conn, True)


def clear_account_receiver(conn: Connection, account_id: int) -> int | None:
    """Take the account's receiver away (a write unit): its waiting events go to the
    ``[webhooks]`` receiver. How many were waiting; ``None`` when it had none."""
    conn.execute("DELETE FROM account_receivers WHERE account_id = ?", (account_id,))
    if conn.changes() == 0:
        return None
    conn.execute("UPDATE webhook_outbox SET receiver = ? WHERE receiver = ?"
                 " AND delivered_at IS NULL", (DEFAULT_RECEIVER, account_id))
    return int(conn.changes())


def account_receivers(conn: Connection) -> list[Receiver]:
    """Every account's own receiver (a read unit)."""
    return [Receiver(as_int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(
        "SELECT account_id, url, secret FROM account_receivers ORDER BY account_id")]


def account_receiver(conn: Connection, account_id: int) -> Receiver | None:
    """The account's own receiver, or ``None`` (a read unit)."""
    row = conn.execute("SELECT account_id, url, secret FROM account_receivers"
                       " WHERE account_id = ?", (account_id,)).fetchone()
    return None if row is None else Receiver(as_int(row[0]), str(row[1]), str(row[2]))


def receiver_for(conn: Connection, account_id: int) -> int | None:
    """Where the account's events go now: its own receiver, else ``[webhooks]``'s while
    it is on, else ``None`` (no event is written). The triggers' rule, for the events
    written in code (inbound messages forwarded)."""
    row = conn.execute(
        "SELECT COALESCE((SELECT a.account_id FROM account_receivers a"
        " WHERE a.account_id = ?), (SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM"
        " webhook_receiver d WHERE d.id = 1 AND d.enabled = 0)))", (account_id,)).fetchone()
    return None if row is None or row[0] is None else as_int(row[0])


def shown_receiver(conn: Connection, account_id: int) -> int:
    """The receiver the account's people are shown (``/api/stats``, the console): its
    own, else the ``[webhooks]`` one (a read unit)."""
    row = conn.execute("SELECT 1 FROM account_receivers WHERE account_id = ?",
                       (account_id,)).fetchone()
    return DEFAULT_RECEIVER if row is None else account_id
