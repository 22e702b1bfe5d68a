"""Version 20 on PostgreSQL: the inbound messages already stored are listed only to the
accounts that had sent to their number, as on SQLite (the same step, the same rows)."""

from __future__ import annotations

from appliance.store.pg import PgConnection
from appliance.store.pg_schema import VERSION_TABLE, migrate
from tests.store.test_migrations import LISTED_BY_NUMBER, OLD_INBOUND


def test_version_20_lists_old_inbound_only_to_the_accounts_that_had_sent_to_the_number(
        pg_conn: PgConnection) -> None:
    migrate(pg_conn)
    for statement in OLD_INBOUND.split(";"):
        pg_conn.execute(statement)
    pg_conn.execute(f"UPDATE {VERSION_TABLE} SET version = 19")
    migrate(pg_conn)
    assert [tuple(r) for r in pg_conn.execute(
        "SELECT account_id, inbound_id FROM inbound_accounts ORDER BY inbound_id, account_id"
    ).fetchall()] == LISTED_BY_NUMBER
    assert [tuple(r) for r in pg_conn.execute("SELECT account_id FROM suppressions")] == [(3,)]
