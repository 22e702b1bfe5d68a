"""Failed sign-ins, used sign-in forms and the forms' key, as rows (EDGE-6).

The console's guard (:class:`appliance.web.pages.sign_in_guard.SignInGuard`) decides
with these units; they are here, below the web layer, so the console writes no SQL of
its own. Failures are counted per key (:func:`user_key`, :func:`address_key`) in
``sign_in_failures``: past a key's free failures each further one blocks it twice as
long as the one before (:func:`delay_s`), and a count is forgotten after
:data:`FORGET_AFTER_S` without failures. A form's token is good once
(``sign_in_tokens_used``), and the key that signs the tokens is made by the first
process that needs it (``appliance_state``, :data:`FORM_KEY_STATE`), so with several
processes on one database a form one process gave is good at another, once, and a
guess counts at all of them. Rows past their time are deleted by the units that
write the tables, so they stay small.
"""

from __future__ import annotations

import secrets
from typing import Final

from appliance.store.connection import Connection
from appliance.store.rows import as_int, as_str

FREE_FAILURES_PER_USER = 3
FREE_FAILURES_PER_ADDRESS = 10
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 900.0
FORGET_AFTER_S = 3600.0
TOKEN_TTL_S = 3600
FORM_KEY_STATE: Final = "console.sign_in_form_key"
_FORGET_MS: Final = int(FORGET_AFTER_S * 1000)


def user_key(name: str) -> str:
    return f"user:{name}"


def address_key(address: str) -> str:
    return f"addr:{address}"


def delay_s(failures: int, free_failures: int) -> float:
    """How long a key waits after its ``failures``-th failure in a row (0: not at all)."""
    beyond = failures - free_failures
    if beyond <= 0:
        return 0.0
    return float(min(FIRST_DELAY_S * 2.0 ** min(beyond - 1, 30), MAX_DELAY_S))


def record_failure(conn: Connection, keys: list[tuple[str, int]], now_ms: int) -> None:
    """A write unit: one more failure for each ``(key, free failures)``; a count older
    than :data:`FORGET_AFTER_S` starts again. One statement per key counts it, so
    processes failing the same name at once each add theirs."""
    for key, free in keys:
        row = conn.execute(
            "INSERT INTO sign_in_failures (key, failures, blocked_until, last_at)"
            " VALUES (?, 1, 0, ?) ON CONFLICT (key) DO UPDATE SET"
            " failures = CASE WHEN excluded.last_at - sign_in_failures.last_at > ? THEN 1"
            " ELSE sign_in_failures.failures + 1 END,"
            " blocked_until = CASE WHEN excluded.last_at - sign_in_failures.last_at > ?"
            " THEN 0 ELSE sign_in_failures.blocked_until END,"
            " last_at = excluded.last_at"
            " RETURNING failures", (key, now_ms, _FORGET_MS, _FORGET_MS)).fetchone()
        assert row is not None  # an upsert with RETURNING returns its row
        wait = delay_s(as_int(row[0]), free)
        if wait:
            conn.execute("UPDATE sign_in_failures SET blocked_until = ? WHERE key = ?",
                         (now_ms + int(wait * 1000), key))
    conn.execute("DELETE FROM sign_in_failures WHERE last_at < ?", (now_ms - _FORGET_MS,))


def clear_failures(conn: Connection, key: str) -> None:
    """Part of a write unit: the key's count is forgotten (a correct password)."""
    conn.execute("DELETE FROM sign_in_failures WHERE key = ?", (key,))


def blocked_s(conn: Connection, keys: list[str], now_ms: int) -> float:
    """How long, in seconds, until none of ``keys`` is blocked (0: none is now)."""
    marks = ", ".join("?" for _ in keys)
    rows = conn.execute(
        f"SELECT blocked_until FROM sign_in_failures WHERE key IN ({marks})"
        " AND last_at >= ?", (*keys, now_ms - _FORGET_MS)).fetchall()
    return max([0.0] + [(as_int(r[0]) - now_ms) / 1000 for r in rows])


def use_token(conn: Connection, nonce: str, issued_ms: int, now_ms: int) -> bool:
    """A write unit: whether this is the token's first use (it is then used up)."""
    conn.execute("DELETE FROM sign_in_tokens_used WHERE issued_at < ?",
                 (now_ms - TOKEN_TTL_S * 1000,))
    row = conn.execute(
        "INSERT INTO sign_in_tokens_used (nonce, issued_at) VALUES (?, ?)"
        " ON CONFLICT (nonce) DO NOTHING RETURNING nonce", (nonce, issued_ms)).fetchone()
    return row is not None


def stored_form_key(conn: Connection) -> bytes | None:
    """The tokens' key, when a process has made it."""
    row = conn.execute("SELECT value FROM appliance_state WHERE key = ?",
                       (FORM_KEY_STATE,)).fetchone()
    return bytes.fromhex(as_str(row[0])) if row is not None else None


def form_key(conn: Connection, now_ms: int) -> bytes:
    """A write unit: the tokens' key, made by the first process that needs it."""
    conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
                 " ON CONFLICT (key) DO NOTHING",
                 (FORM_KEY_STATE, secrets.token_hex(32), now_ms))
    key = stored_form_key(conn)
    assert key is not None
    return key
