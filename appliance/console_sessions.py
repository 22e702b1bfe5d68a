"""Console sign-in sessions as rows (table ``sessions``).

A session is a random token the browser keeps in its cookie
(:mod:`appliance.web.session`); the store keeps only the token's sha256, so a copy of
the database does not sign anyone in, and each session has its own CSRF token. These
units are below the web layer, so the console writes no SQL of its own.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.users import User

SESSION_TTL_MS = 12 * 3600 * 1000
MAX_TOKEN = 100


@dataclass(frozen=True)
class ConsoleSession:
    user: User
    csrf_token: str
    expires_at: int

    @property
    def account_id(self) -> int:
        return self.user.account_id


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_session(conn: Connection, user_id: int, now_ms: int,
                   ttl_ms: int = SESSION_TTL_MS) -> str:
    """Write unit: a new session for ``user_id``; returns the cookie token in clear.

    Expired sessions are deleted on the way, so the table stays small.
    """
    conn.execute("DELETE FROM sessions WHERE expires_at <= ?", (now_ms,))
    token = secrets.token_urlsafe(32)
    conn.execute(
        "INSERT INTO sessions (token_hash, user_id, csrf_token, created_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (hash_token(token), user_id, secrets.token_urlsafe(32), now_ms, now_ms + ttl_ms),
    )
    return token


def session_for(conn: Connection, token: str, now_ms: int) -> ConsoleSession | None:
    """Read unit: the live session whose cookie is ``token``, or None."""
    if not token or len(token) > MAX_TOKEN:
        return None
    row = conn.execute(
        "SELECT u.id, u.name, u.account_id, a.name, s.csrf_token, s.expires_at"
        " FROM sessions s JOIN users u ON u.id = s.user_id"
        " JOIN accounts a ON a.id = u.account_id"
        " WHERE s.token_hash = ? AND s.expires_at > ?",
        (hash_token(token), now_ms),
    ).fetchone()
    if row is None:
        return None
    user = User(as_int(row[0]), str(row[1]), as_int(row[2]), str(row[3]))
    return ConsoleSession(user, str(row[4]), as_int(row[5]))


def end_session(conn: Connection, token: str) -> None:
    """Write unit: forget the session behind ``token`` (sign-out)."""
    conn.execute("DELETE FROM sessions WHERE token_hash = ?", (hash_token(token),))
