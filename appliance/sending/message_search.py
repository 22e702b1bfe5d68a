"""Finding an account's messages by state, campaign, provider and time of creation.

Read units for the console's messages page. Newest first, paged by message id
(``before``), so every page costs the same however deep it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.sending.messages import MESSAGE_COLUMNS, Message
from appliance.store.connection import Connection
from appliance.store.rows import as_int


@dataclass(frozen=True)
class MessageFilter:
    state: str | None = None
    campaign_id: int | None = None
    provider: str | None = None
    created_from: int | None = None  # epoch ms, inclusive
    created_to: int | None = None  # epoch ms, exclusive

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.state, self.campaign_id, self.provider,
                                       self.created_from, self.created_to))


def search_messages(conn: Connection, account_id: int, f: MessageFilter,
                    before_id: int | None = None, limit: int = 100) -> list[Message]:
    where = ["account_id = ?"]
    args: list[Any] = [account_id]
    if f.state is not None:
        where.append("state = ?")
        args.append(f.state)
    if f.campaign_id is not None:
        where.append("campaign_id = ?")
        args.append(f.campaign_id)
    if f.provider is not None:
        where.append("provider = ?")
        args.append(f.provider)
    if f.created_from is not None:
        where.append("created_at >= ?")
        args.append(f.created_from)
    if f.created_to is not None:
        where.append("created_at < ?")
        args.append(f.created_to)
    if before_id is not None:
        where.append("id < ?")
        args.append(before_id)
    rows: list[Any] = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {' AND '.join(where)}"
        " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    return [Message(*r) for r in rows]


def campaign_choices(conn: Connection, account_id: int,
                     limit: int = 200) -> list[tuple[int, str]]:
    """(campaign id, list name) of the account's latest campaigns."""
    return [(as_int(r[0]), str(r[1])) for r in conn.execute(
        "SELECT c.id, l.name FROM campaigns c JOIN lists l ON l.id = c.list_id"
        " WHERE c.account_id = ? ORDER BY c.id DESC LIMIT ?", (account_id, limit))]
