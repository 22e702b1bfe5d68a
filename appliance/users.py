"""Console users: a name, a password hash and the account they act for.

Passwords are hashed with scrypt (``hashlib.scrypt``, a random 16-byte salt per
user); the stored form names its parameters, ``scrypt$n$r$p$salt$hash``, so they
can be raised later without breaking old hashes. Hashing is deliberately slow
(tens of milliseconds): callers run it off the event loop and outside write units,
then hand the finished hash to :func:`create_user`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from appliance.store.connection import Connection
from appliance.store.rows import as_int

SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
MAX_NAME = 100
MIN_PASSWORD = 8
MAX_PASSWORD = 1024
# Checked against when the user name is unknown, so a miss costs what a hit costs.
_ABSENT_USER_HASH: str | None = None


class UserExists(ValueError):
    """A console user with that name already exists."""


@dataclass(frozen=True)
class User:
    id: int
    name: str
    account_id: int
    account_name: str


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * n * r + 1024 * 1024, dklen=32)


def check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise ValueError(f"user names are 1 to {MAX_NAME} printable characters")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"passwords are at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise ValueError(f"passwords are at most {MAX_PASSWORD} characters")
    return password


def hash_password(password: str) -> str:
    """The storable scrypt hash of ``password`` (slow on purpose)."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(stored: str, password: str) -> bool:
    """Whether ``password`` matches the stored hash; False for a malformed hash."""
    if len(password) > MAX_PASSWORD:
        return False
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(digest, validate=True)
        got = _scrypt(password, base64.b64decode(salt, validate=True), int(n), int(r), int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, want)


def absent_user_hash() -> str:
    """A hash nobody's password matches, to spend the same time on unknown names."""
    global _ABSENT_USER_HASH
    if _ABSENT_USER_HASH is None:
        _ABSENT_USER_HASH = hash_password(secrets.token_urlsafe(24))
    return _ABSENT_USER_HASH


def create_user(conn: Connection, name: str, password_hash: str, account_id: int,
                now_ms: int) -> User:
    """Write unit: a new console user for ``account_id``; :class:`UserExists` if taken."""
    name = check_name(name)
    if conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
        raise UserExists(f"a user named {name!r} already exists")
    conn.execute(
        "INSERT INTO users (account_id, name, password_hash, created_at) VALUES (?, ?, ?, ?)",
        (account_id, name, password_hash, now_ms),
    )
    user = get_user(conn, conn.last_insert_rowid())
    assert user is not None
    return user


_USER_SELECT = (
    "SELECT u.id, u.name, u.account_id, a.name FROM users u"
    " JOIN accounts a ON a.id = u.account_id"
)


def get_user(conn: Connection, user_id: int) -> User | None:
    row = conn.execute(f"{_USER_SELECT} WHERE u.id = ?", (user_id,)).fetchone()
    return None if row is None else User(as_int(row[0]), str(row[1]), as_int(row[2]), str(row[3]))


def user_for_sign_in(conn: Connection, name: str) -> tuple[User, str] | None:
    """Read unit: the user called ``name`` and their stored hash, or None."""
    row = conn.execute(
        "SELECT u.id, u.name, u.account_id, a.name, u.password_hash FROM users u"
        " JOIN accounts a ON a.id = u.account_id WHERE u.name = ?",
        (name.strip(),),
    ).fetchone()
    if row is None:
        return None
    return User(as_int(row[0]), str(row[1]), as_int(row[2]), str(row[3])), str(row[4])
