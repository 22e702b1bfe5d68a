"""Version 21 on PostgreSQL: the outbox events already written go to the ``[webhooks]``
receiver and stay due, as on SQLite; the schema is then a new database's."""

from __future__ import annotations

from appliance.store.pg import PgConnection
from appliance.store.pg_schema import VERSION_TABLE, migrate
from appliance.webhooks.outbox import due_events

AT_VERSION_20 = (
    "DROP TABLE account_receivers;"
    " DROP INDEX webhook_outbox_waiting;"
    " DROP INDEX webhook_outbox_due;"
    " ALTER TABLE webhook_outbox DROP COLUMN receiver;"
    " ALTER TABLE webhook_outbox DROP COLUMN inbound_id;"
    " CREATE INDEX webhook_outbox_due ON webhook_outbox (next_try_at)"
    " WHERE next_try_at IS NOT NULL;"
    f" UPDATE {VERSION_TABLE} SET version = 20")


def columns(conn: PgConnection, table: str) -> list[tuple[str, str, str, str | None]]:
    return [tuple(r) for r in conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default"
        " FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = ? ORDER BY column_name", (table,))]


def test_version_21_keeps_waiting_events_going_to_the_webhooks_receiver(
        pg_conn: PgConnection) -> None:
    migrate(pg_conn)
    want = {t: columns(pg_conn, t) for t in ("webhook_outbox", "account_receivers")}
    for statement in AT_VERSION_20.split(";"):
        pg_conn.execute(statement)
    pg_conn.execute(
        "INSERT INTO webhook_outbox (event_id, message_id, ref, state, at, next_try_at,"
        " delivered_at) VALUES ('evt_1', 7, 'r', 'QUEUED', 5, 5, NULL),"
        " ('evt_2', 7, 'r', 'SUBMITTED', 6, NULL, NULL)")
    migrate(pg_conn)
    assert {t: columns(pg_conn, t) for t in want} == want
    assert [tuple(r) for r in pg_conn.execute(
        "SELECT event_id, receiver, inbound_id FROM webhook_outbox ORDER BY id")] == [
        ("evt_1", 0, None), ("evt_2", 0, None)]
    due, _ = due_events(pg_conn, 10, 10, 0)
    assert [e.event_id for e in due] == ["evt_1"]
    indexes = {str(r[0]): str(r[1]) for r in pg_conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " AND tablename = 'webhook_outbox'")}
    assert "(receiver, next_try_at)" in indexes["webhook_outbox_due"]
    assert "(receiver, id)" in indexes["webhook_outbox_waiting"]
