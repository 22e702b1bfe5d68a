"""Version 20 of the schema: inbound messages re-listed by the rule of TEAM-4 (frozen).

An inbound message belongs to the accounts that had sent to its number before it came,
through any provider (:mod:`appliance.inbound.store`). Before version 20 it belonged to
the accounts that had sent to it through the provider it came from, and to every account
when none had: a reply was listed to accounts that never messaged the number. This step
lists every inbound message already stored as one filed now would be: to the accounts
with a message to its number created no later than it was received, and to none when
there is none. Suppressions its STOP made stay as they are: an opt-out is never undone by
an upgrade.
"""

from __future__ import annotations

import apsw


def list_inbound_by_number(conn: apsw.Connection) -> None:
    """Version 20 (TEAM-4): ``inbound_accounts`` rewritten by the number's senders; one
    probe of ``messages_msisdn (account_id, msisdn)`` per inbound message and account.
    The SQL is the same on both engines (the PostgreSQL migration runs it too)."""
    conn.execute("DELETE FROM inbound_accounts")
    conn.execute(
        "INSERT INTO inbound_accounts (account_id, inbound_id)"
        " SELECT a.id, i.id FROM inbound_messages i, accounts a"
        " WHERE EXISTS (SELECT 1 FROM messages m WHERE m.account_id = a.id"
        " AND m.msisdn = i.msisdn AND m.created_at <= i.received_at)")
