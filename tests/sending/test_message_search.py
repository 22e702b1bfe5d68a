"""The messages page's filters over a real store: state, campaign, provider, time."""

from __future__ import annotations

import apsw

from appliance.sending.message_search import MessageFilter, search_messages
from appliance.store import Store
from tests.reports.support import add_account, add_message


def test_each_filter_narrows_and_pages_go_back_in_time(store: Store) -> None:
    acct = store.writer.call(add_account)
    other = store.writer.call(lambda c: add_account(c, "other"))

    def seed(conn: apsw.Connection) -> None:
        conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (?, 'l', 0)",
                     (acct,))
        conn.execute("INSERT INTO campaigns (account_id, list_id, provider, body,"
                     " idempotency_key, state, total, created_at, updated_at)"
                     " VALUES (?, 1, 'gw', 'b', 'k', 'RUNNING', 1, 0, 0)", (acct,))
        for i, (state, provider, created) in enumerate([
                ("DELIVERED", "gw", 1000), ("FAILED", "gw", 2000), ("DELIVERED", "tw", 3000),
                ("SUBMITTED", "gw", 4000)]):
            add_message(conn, acct, f"M{i}", state=state, created_at=created,
                        provider=provider)
        add_message(conn, other, "X", state="DELIVERED", created_at=1000)
        conn.execute("UPDATE messages SET campaign_id = 1 WHERE ref = 'M1'")

    store.writer.call(seed)

    def refs(f: MessageFilter, before: int | None = None, limit: int = 100) -> list[str]:
        return [m.ref for m in store.readers.call(
            lambda c: search_messages(c, acct, f, before, limit))]

    assert refs(MessageFilter()) == ["M3", "M2", "M1", "M0"]  # newest first, own only
    assert refs(MessageFilter(state="DELIVERED")) == ["M2", "M0"]
    assert refs(MessageFilter(provider="gw", state="DELIVERED")) == ["M0"]
    assert refs(MessageFilter(campaign_id=1)) == ["M1"]
    assert refs(MessageFilter(created_from=2000, created_to=4000)) == ["M2", "M1"]
    page = store.readers.call(lambda c: search_messages(c, acct, MessageFilter(), None, 2))
    assert refs(MessageFilter(), before=page[-1].id) == ["M1", "M0"]
