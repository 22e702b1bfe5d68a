"""``database_url``: is it a PostgreSQL URL we can use, and how it is shown (masked)."""

from __future__ import annotations

import urllib.parse

DATABASE_SCHEMES = ("postgresql", "postgres")


def database_url_problem(url: str) -> str | None:
    """Why ``url`` is not a PostgreSQL URL the appliance can use, or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in DATABASE_SCHEMES:
        return "is not a postgresql:// URL (postgresql://user:password@host:5432/database)"
    if any(c.isspace() for c in url):
        return "has white space in it"
    query = urllib.parse.parse_qs(parts.query)
    if not parts.hostname and "host" not in query:
        return "names no host (postgresql://user:password@host:5432/database)"
    if not parts.path.strip("/") and "dbname" not in query:
        return "names no database (postgresql://user:password@host:5432/database)"
    if port is not None and not 0 < port < 65536:
        return "has a port that is not a TCP port"
    return None


def mask_database_url(url: str) -> str:
    """``url`` with its password (in the user part or ``?password=``) as ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = "&".join(f"{pair.partition('=')[0]}=***" if pair.startswith("password=") else pair
                     for pair in parts.query.split("&") if pair)
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))
