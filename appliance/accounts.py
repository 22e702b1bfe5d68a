"""Accounts and their API keys.

A key is shown once, when it is made; the store keeps only its sha256 and its first
characters (the prefix people recognise it by). Looking a key up by its hash and
comparing with ``hmac.compare_digest`` keeps the check constant-time in the key's
content. A revoked key (``revoked_at`` set) is refused by the very next request:
nothing caches a key's account.

:func:`choose_account` is how commands that act for an account pick it: by name,
by key, or, when the appliance has exactly one account, that one; never a new one.
:func:`account_for_user` is ``user create``'s: the same, except that with no account
at all it makes ``default`` (a console user needs one to work in).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

from appliance.key_quotas import KeyQuota
from appliance.store.connection import Connection
from appliance.store.rows import as_int

KEY_PREFIX = "apl_"
SHOWN_PREFIX = 8  # characters of a key kept in clear to recognise it by
WHOLE_KEY_CHARS = len(KEY_PREFIX) + 43  # token_urlsafe(32): 43 characters
ELLIPSES = ("…", "...")  # how 'appliance key list' (or a copy of it) ends a prefix


@dataclass(frozen=True)
class Account:
    """An account; ``quota``: the limits of the key a request came with (``None`` for
    the console and the commands). The same account whatever the key."""

    id: int
    name: str
    quota: KeyQuota | None = field(default=None, compare=False)


class AccountExists(ValueError):
    pass


class AccountChoice(ValueError):
    """No account could be chosen (none, several, or not the one named)."""


class KeyChoice(ValueError):
    """No single key matches what was given."""


@dataclass(frozen=True)
class ApiKey:
    id: int
    account_id: int
    account_name: str
    prefix: str
    created_at: int
    revoked_at: int | None
    rate_per_s: float | None = None
    daily_limit: int | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def ensure_account(conn: Connection, name: str, now_ms: int) -> Account:
    """The account called ``name``, created if missing (a write unit)."""
    conn.execute(
        "INSERT INTO accounts (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        (name, now_ms),
    )
    row = conn.execute("SELECT id, name FROM accounts WHERE name = ?", (name,)).fetchone()
    assert row is not None
    return Account(as_int(row[0]), str(row[1]))


def create_account(conn: Connection, name: str, now_ms: int) -> tuple[Account, str]:
    """Create an account and its first key; returns the key in clear (a write unit)."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("account name must be 1 to 100 characters")
    exists = conn.execute("SELECT 1 FROM accounts WHERE name = ?", (name,)).fetchone()
    if exists:
        raise AccountExists(f"an account named {name!r} already exists")
    account = ensure_account(conn, name, now_ms)
    return account, add_key(conn, account.id, now_ms)


def add_key(conn: Connection, account_id: int, now_ms: int, *,
            rate_per_s: float | None = None, daily_limit: int | None = None) -> str:
    """A new key of the account (a write unit), with its limits (``None``: none;
    :mod:`appliance.key_quotas`); returns it in clear, the only time it is."""
    key = new_key()
    conn.execute(
        "INSERT INTO api_keys (account_id, key_hash, prefix, created_at, rate_per_s,"
        " daily_limit) VALUES (?, ?, ?, ?, ?, ?)",
        (account_id, hash_key(key), key[:SHOWN_PREFIX], now_ms, rate_per_s, daily_limit),
    )
    return key


def account_for_key(conn: Connection, key: str) -> Account | None:
    """The account a presented key belongs to, with the key's limits, or None (a read
    unit)."""
    wanted = hash_key(key)
    row = conn.execute(
        "SELECT a.id, a.name, k.key_hash, k.id, k.rate_per_s, k.daily_limit"
        " FROM api_keys k JOIN accounts a ON a.id = k.account_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        (wanted,),
    ).fetchone()
    if row is None or not hmac.compare_digest(str(row[2]), wanted):
        return None
    quota = KeyQuota(as_int(row[3]), None if row[4] is None else float(row[4]),
                     None if row[5] is None else as_int(row[5]))
    return Account(as_int(row[0]), str(row[1]), quota)


def find_account(conn: Connection, name: str) -> Account | None:
    row = conn.execute("SELECT id, name FROM accounts WHERE name = ?", (name,)).fetchone()
    return None if row is None else Account(as_int(row[0]), str(row[1]))


def list_accounts(conn: Connection) -> list[Account]:
    return [Account(as_int(r[0]), str(r[1]))
            for r in conn.execute("SELECT id, name FROM accounts ORDER BY name")]


def choose_account(conn: Connection, name: str | None = None,
                   key: str | None = None) -> Account:
    """The account a command acts for (a read unit): the one named, the one the key
    belongs to, or the only one there is. Raises :class:`AccountChoice` otherwise."""
    if key is not None:
        found = account_for_key(conn, key)
        if found is None:
            raise AccountChoice("that API key is not valid (unknown or revoked)")
        if name is not None and found.name != name:
            raise AccountChoice(f"that API key belongs to account {found.name!r}, not {name!r}")
        return found
    accounts = list_accounts(conn)
    names = ", ".join(a.name for a in accounts)
    if name is not None:
        for account in accounts:
            if account.name == name:
                return account
        raise AccountChoice(f"no account named {name!r}"
                            + (f"; the accounts are: {names}" if accounts else
                               "; create it with: appliance account create NAME"))
    if not accounts:
        raise AccountChoice("there is no account yet; create one with:"
                            " appliance account create NAME")
    if len(accounts) > 1:
        raise AccountChoice(f"there are {len(accounts)} accounts ({names}): choose one with"
                            " --account NAME (or --key KEY)")
    return accounts[0]


DEFAULT_ACCOUNT = "default"


def account_for_user(conn: Connection, name: str | None, now_ms: int) -> Account:
    """The account a new console user works in (a write unit): the one named (created
    if missing); unnamed, the only account there is, or ``default`` (created) when
    there is none yet. Several and none named: :class:`AccountChoice`, listing them,
    as every command that acts for an account refuses (a ``default`` made beside the
    only account left ``key list`` and ``import`` asking for ``--account`` after it)."""
    if name is not None:
        return ensure_account(conn, name, now_ms)
    accounts = list_accounts(conn)
    if not accounts:
        return ensure_account(conn, DEFAULT_ACCOUNT, now_ms)
    return choose_account(conn)


_KEY_COLUMNS = ("k.id, k.account_id, a.name, k.prefix, k.created_at, k.revoked_at,"
                " k.rate_per_s, k.daily_limit"
                " FROM api_keys k JOIN accounts a ON a.id = k.account_id")


def _key(row: Any) -> ApiKey:
    return ApiKey(int(row[0]), int(row[1]), str(row[2]), str(row[3]), int(row[4]), row[5],
                  None if row[6] is None else float(row[6]),
                  None if row[7] is None else int(row[7]))


def list_keys(conn: Connection, account_id: int) -> list[ApiKey]:
    """The account's keys, newest first, revoked ones too (a read unit)."""
    return [_key(r) for r in conn.execute(
        f"SELECT {_KEY_COLUMNS} WHERE k.account_id = ? ORDER BY k.id DESC", (account_id,))]


def get_key(conn: Connection, key_id: int, account_id: int) -> ApiKey | None:
    row = conn.execute(f"SELECT {_KEY_COLUMNS} WHERE k.id = ? AND k.account_id = ?",
                       (key_id, account_id)).fetchone()
    return None if row is None else _key(row)


def find_key(conn: Connection, given: str, account_id: int | None = None) -> ApiKey:
    """The one key ``given`` designates: the whole key, or its prefix as listed (a read
    unit). Raises :class:`KeyChoice` when none or several match.

    A prefix may be given as ``appliance key list`` shows it (``apl_AbCd…``), and may be
    longer than the :data:`SHOWN_PREFIX` characters kept in clear: only those are
    compared then (the rest is known to no one but the key's holder)."""
    given = given.strip()
    for ellipsis in ELLIPSES:
        given = given.removesuffix(ellipsis)
    if len(given) > SHOWN_PREFIX and given.startswith(KEY_PREFIX):
        rows = conn.execute(f"SELECT {_KEY_COLUMNS} WHERE k.key_hash = ?",
                            (hash_key(given),)).fetchall()
        if rows:
            return _key(rows[0])
        if len(given) >= WHOLE_KEY_CHARS:
            raise KeyChoice("no key matches that key")
        given = given[:SHOWN_PREFIX]  # a longer prefix: what is kept of it
    if not given:
        raise KeyChoice("give the key's prefix as 'appliance key list' shows it")
    pattern = given.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    where = "k.prefix LIKE ? ESCAPE '\\'"
    args: list[object] = [pattern]
    if account_id is not None:
        where += " AND k.account_id = ?"
        args.append(account_id)
    rows = conn.execute(f"SELECT {_KEY_COLUMNS} WHERE {where} ORDER BY k.id", args).fetchall()
    keys = [_key(r) for r in rows]
    if not keys:
        raise KeyChoice(f"no key starts with {given!r}")
    active = [k for k in keys if k.active] or keys
    if len(active) > 1:
        shown = ", ".join(f"{k.prefix}… (account {k.account_name}, id {k.id})" for k in active)
        raise KeyChoice(f"{len(active)} keys start with {given!r}: {shown}; "
                        + _narrower(given, active))
    return active[0]


def _narrower(given: str, keys: list[ApiKey]) -> str:
    """What tells the keys apart: more of the prefix when there is more to give, the
    whole key, and --account only when they are in different accounts."""
    ways = []
    if len(given) < SHOWN_PREFIX and len({k.prefix for k in keys}) > 1:
        ways.append(f"more of the prefix (its {SHOWN_PREFIX} characters)")
    ways.append("the whole key")
    if len({k.account_id for k in keys}) > 1:
        ways.append("--account NAME")
    return "give " + ", or ".join(ways)


def revoke_key(conn: Connection, key_id: int, now_ms: int) -> bool:
    """Revoke a key (a write unit); False when it was revoked already."""
    conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                 (now_ms, key_id))
    return bool(conn.changes())
