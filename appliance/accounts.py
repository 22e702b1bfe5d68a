"""Accounts and their API keys.

A key is shown once, when it is made; the store keeps only its sha256. Looking a
key up by its hash and comparing with ``hmac.compare_digest`` keeps the check
constant-time in the key's content.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

import apsw

KEY_PREFIX = "apl_"


@dataclass(frozen=True)
class Account:
    id: int
    name: str


class AccountExists(ValueError):
    pass


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def ensure_account(conn: apsw.Connection, name: str, now_ms: int) -> Account:
    """The account called ``name``, created if missing (a write unit)."""
    conn.execute(
        "INSERT INTO accounts (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        (name, now_ms),
    )
    row = conn.execute("SELECT id, name FROM accounts WHERE name = ?", (name,)).fetchone()
    assert row is not None
    return Account(int(row[0]), str(row[1]))


def create_account(conn: apsw.Connection, name: str, now_ms: int) -> tuple[Account, str]:
    """Create an account and its first key; returns the key in clear (a write unit)."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("account name must be 1 to 100 characters")
    exists = conn.execute("SELECT 1 FROM accounts WHERE name = ?", (name,)).fetchone()
    if exists:
        raise AccountExists(f"an account named {name!r} already exists")
    account = ensure_account(conn, name, now_ms)
    return account, add_key(conn, account.id, now_ms)


def add_key(conn: apsw.Connection, account_id: int, now_ms: int) -> str:
    key = new_key()
    conn.execute(
        "INSERT INTO api_keys (account_id, key_hash, prefix, created_at) VALUES (?, ?, ?, ?)",
        (account_id, hash_key(key), key[:8], now_ms),
    )
    return key


def account_for_key(conn: apsw.Connection, key: str) -> Account | None:
    """The account a presented key belongs to, or None (a read unit)."""
    wanted = hash_key(key)
    row = conn.execute(
        "SELECT a.id, a.name, k.key_hash FROM api_keys k JOIN accounts a ON a.id = k.account_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        (wanted,),
    ).fetchone()
    if row is None or not hmac.compare_digest(str(row[2]), wanted):
        return None
    return Account(int(row[0]), str(row[1]))
