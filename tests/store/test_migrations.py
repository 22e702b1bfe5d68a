"""Migrations: a database from every released schema version migrates to the same
schema a new file gets (tables, indexes, triggers), and keeps its rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.sending.campaign_messages import expand_chunk, next_to_expand
from appliance.sending.campaigns import get_campaign
from appliance.store.migrations import MIGRATIONS
from appliance.store.schema import SCHEMA_VERSION, migrate, open_connection
from appliance.webhooks.outbox import Gate, due_events, outbox_health, set_receiver

SCHEMAS = Path(__file__).parent / "schemas"
RELEASED = sorted(int(p.stem.removeprefix("v")) for p in SCHEMAS.glob("v*.sql"))


def shape(path: Path) -> dict[str, Any]:
    """Tables with their columns (name, type, not null, default, pk), every index and
    every trigger."""
    conn = open_connection(str(path), readonly=True)
    try:
        out: dict[str, Any] = {}
        tables: list[Any] = conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()
        for (name,) in tables:
            cols: list[Any] = conn.execute(
                "SELECT name, type, \"notnull\", dflt_value, pk"
                f" FROM pragma_table_info('{name}') ORDER BY name").fetchall()
            out[f"table {name}"] = sorted(tuple(c) for c in cols)
        indexes: list[Any] = conn.execute(
            "SELECT il.name, m.name, il.\"unique\" FROM sqlite_schema m,"
            " pragma_index_list(m.name) il WHERE m.type = 'table'").fetchall()
        for name, table, unique in indexes:
            info: list[Any] = conn.execute(
                f"SELECT name FROM pragma_index_info('{name}') ORDER BY seqno").fetchall()
            covered = [str(r[0]) for r in info]
            # Auto-indexes carry a generated name; compare them by what they cover.
            out[f"index {table}({','.join(covered)})"] = (table, int(unique), covered)
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_schema"
                                      " WHERE type IN ('trigger', 'index') AND sql IS NOT NULL"):
            out[f"sql {name}"] = " ".join(str(sql).split())  # triggers, partial indexes
        return out
    finally:
        conn.close()


def test_every_released_version_has_its_schema_file() -> None:
    assert RELEASED[0] == 1
    assert RELEASED[-1] <= SCHEMA_VERSION


@pytest.mark.parametrize("version", RELEASED)
def test_an_old_database_migrates_to_the_current_schema(tmp_path: Path, version: int) -> None:
    fresh = tmp_path / "fresh.db"
    migrate(str(fresh))
    old = tmp_path / "old.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / f"v{version}.sql").read_text())
    conn.execute(f"PRAGMA user_version={version}")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'kept', 0)")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    assert shape(old) == shape(fresh)
    check = open_connection(str(old), readonly=True)
    try:
        assert check.execute("SELECT name FROM accounts").fetchall() == [("kept",)]
    finally:
        check.close()


def test_version_2_counts_the_parts_of_existing_messages_and_gives_sent_ones_a_part(
        tmp_path: Path) -> None:
    old = tmp_path / "v1.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / "v1.sql").read_text())
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0)")
    rows = [  # ref, body, state, provider id, submitted_at
        ("tr", "Merhaba Ayşe, " + "ş" * 80, "DELIVERED", "P1", 5),
        ("queued", "hello", "QUEUED", None, None),
        ("refused", "x" * 200, "REJECTED", None, None),
        ("unsure", "hello", "UNCERTAIN", None, None),
    ]
    conn.executemany(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, provider_msg_id, created_at, updated_at, submitted_at)"
        " VALUES (?, 1, 'p', '+905321234567', ?, ?, 7, 0, ?, 0, 9, ?)", rows)
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old), readonly=True)
    try:
        got = {r[0]: tuple(r[1:]) for r in check.execute(
            "SELECT ref, encoding, parts, ucs2_because FROM messages")}
        parts = {r[0]: tuple(r[1:]) for r in check.execute(
            "SELECT m.ref, p.part, p.provider_msg_id, p.state, p.state_at FROM message_parts p"
            " JOIN messages m ON m.id = p.message_id")}
    finally:
        check.close()
    assert got == {"tr": ("UCS-2", 2, "ş"), "queued": ("GSM-7", 1, None),
                   "refused": ("GSM-7", 2, None), "unsure": ("GSM-7", 1, None)}
    assert parts == {"tr": (1, "P1", "DELIVERED", 7), "unsure": (1, None, "UNCERTAIN", 7)}


def at_version(path: Path, version: int) -> None:
    """A database as an appliance at ``version`` left it: v1, then the steps up to it."""
    conn = apsw.Connection(str(path))
    conn.execute((SCHEMAS / "v1.sql").read_text())
    with conn:
        for step in range(2, version + 1):
            if step in MIGRATIONS:  # a version without a step changed nothing
                MIGRATIONS[step](conn)
        conn.execute(f"PRAGMA user_version={version}")
    conn.close()


def test_a_database_from_before_the_webhook_outbox_gets_it(tmp_path: Path) -> None:
    """Version 6 (OPS-5) on a version-5 file: the outbox; once webhooks are turned on, a
    message accepted afterwards writes its event."""
    old = tmp_path / "v5.db"
    at_version(old, 5)
    assert migrate(str(old)) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    migrate(str(fresh))
    assert shape(old) == shape(fresh)
    conn = open_connection(str(old))
    try:
        set_receiver(conn, "http://127.0.0.1:9/", 0)
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
                     " INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
                     " next_attempt_at, created_at, updated_at)"
                     " VALUES ('r', 1, 'p', '+905321234567', 'hi', 'QUEUED', 0, 5, 5)")
        assert conn.execute("SELECT ref, state, previous, at FROM webhook_outbox").fetchall() \
            == [("r", "QUEUED", None, 5)]
    finally:
        conn.close()


def test_version_10_keeps_the_stored_payloads_with_the_body_last(tmp_path: Path) -> None:
    """Version 10 rebuilds import_payloads with ``body`` last (only a last column's
    zeroblob is stored without making it in memory) and keeps every payload."""
    old = tmp_path / "v9.db"
    at_version(old, 9)
    conn = apsw.Connection(str(old))
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
                 " INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0);"
                 " INSERT INTO import_jobs (id, account_id, list_id, idempotency_key,"
                 " payload_sha256, region, state, total, processed, created_at, updated_at)"
                 " VALUES (1, 1, 1, 'k', 'h', 'TR', 'RUNNING', 3, 2, 0, 0)")
    conn.execute("INSERT INTO import_payloads (job_id, content_type, body, received_at)"
                 " VALUES (1, 'text/plain', ?, 5)", (b"+905321234567\n" * 3,))
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old), readonly=True)
    try:
        columns = [str(r[1]) for r in check.execute("PRAGMA table_info(import_payloads)")]
        kept = check.execute("SELECT job_id, content_type, body, received_at"
                             " FROM import_payloads").fetchall()
        job = check.execute("SELECT processed, window_to, window_done, window_lines"
                            " FROM import_jobs").fetchall()
    finally:
        check.close()
    assert columns[-1] == "body"
    assert kept == [(1, "text/plain", b"+905321234567\n" * 3, 5)]
    assert job == [(2, None, 0, 0)]  # part-way between chunks: where a window starts


def test_version_18_gives_every_existing_message_no_error_kind(tmp_path: Path) -> None:
    old = tmp_path / "v5.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / "v5.sql").read_text())
    conn.execute("PRAGMA user_version=5")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0)")
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, created_at, updated_at, error) VALUES ('refused', 1, 'p',"
        " '+905321234567', 'x', 'REJECTED', 7, 0, 0, 9, 'iletimerkezi 469')")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old), readonly=True)
    try:
        assert check.execute("SELECT ref, state, error_kind FROM messages").fetchall() == [
            ("refused", "REJECTED", None)]
    finally:
        check.close()



def test_version_14_says_how_each_existing_report_came(tmp_path: Path) -> None:
    """Version 14 (ROUTE-2) on a version-13 file: ``report_inbox.source`` is ``session``
    for a report that came in an SMPP ``deliver_sm`` (its raw row's method ``SMPP``, or,
    that row pruned, its provider's reports came so), else ``callback``: no pull was
    made before it. No message has been asked about yet."""
    old = tmp_path / "v13.db"
    at_version(old, 13)
    conn = apsw.Connection(str(old))
    conn.execute(
        "INSERT INTO raw_reports (id, provider, method, content_type, query, body,"
        " received_at, parsed) VALUES"
        " (1, 'smsc', 'SMPP', 'application/vnd.smpp.deliver-sm', '', x'00', 5, 1),"
        " (2, 'sim', 'POST', 'application/json', '', x'7b7d', 5, 1),"
        " (3, 'tw', 'GET', '', 'MessageSid=SM1', x'', 5, 1)")
    conn.execute(
        "INSERT INTO report_inbox (provider, ref, status, reported_at, state, raw_id,"
        " received_at, next_try_at) VALUES"
        " ('smsc', 'deliver-sm', 'DELIVRD', 1, 'DELIVERED', 1, 5, 5),"
        " ('sim', 'posted', 'delivered', 1, 'DELIVERED', 2, 5, 5),"
        " ('tw', 'got', 'delivered', 1, 'DELIVERED', 3, 5, 5),"
        " ('smsc', 'smpp-pruned', 'UNDELIV', 1, 'FAILED', 41, 5, 5),"
        " ('sim', 'posted-pruned', 'failed', 1, 'FAILED', 42, 5, 5),"
        " ('gone', 'no-raw', 'delivered', 1, 'DELIVERED', NULL, 5, 5)")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    migrate(str(fresh))
    assert shape(old) == shape(fresh)
    check = open_connection(str(old), readonly=True)
    try:
        assert {str(ref): str(source) for ref, source in check.execute(
            "SELECT ref, source FROM report_inbox")} == {
            "deliver-sm": "session", "posted": "callback", "got": "callback",
            "smpp-pruned": "session", "posted-pruned": "callback", "no-raw": "callback"}
        assert check.execute("SELECT count(*) FROM message_pulls").fetchall() == [(0,)]
    finally:
        check.close()


OLD_INBOUND = (
    "INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 0);"
    # a and b messaged +905321230001 (through p and q) before its reply came at 50; c after
    " INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
    " next_attempt_at, created_at, updated_at) VALUES"
    " ('a1', 1, 'p', '+905321230001', 'x', 'QUEUED', 0, 0, 10, 10),"
    " ('b1', 2, 'q', '+905321230001', 'x', 'QUEUED', 0, 0, 20, 20),"
    " ('c1', 3, 'p', '+905321230001', 'x', 'QUEUED', 0, 0, 60, 60);"
    # As filed before: through r nobody had sent to either number, so every account.
    " INSERT INTO inbound_messages (id, provider, msisdn, to_number, text, received_at,"
    " keyword) VALUES (1, 'r', '+905321230001', '', 'STOP', 50, 'STOP'),"
    " (2, 'r', '+905321230002', '', 'hello', 50, NULL);"
    " INSERT INTO inbound_accounts (account_id, inbound_id) VALUES"
    " (1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2);"
    " INSERT INTO suppressions (account_id, msisdn, reason, source, inbound_id, created_at)"
    " VALUES (3, '+905321230001', 'STOP', 'inbound', 1, 50)")
LISTED_BY_NUMBER = [(1, 1), (2, 1)]  # (account, inbound): only the number's senders before it


def test_version_20_lists_old_inbound_only_to_the_accounts_that_had_sent_to_the_number(
        tmp_path: Path) -> None:
    old = tmp_path / "v5.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / "v5.sql").read_text())
    conn.execute("PRAGMA user_version=5")
    conn.execute(OLD_INBOUND)
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old), readonly=True)
    try:
        assert check.execute("SELECT account_id, inbound_id FROM inbound_accounts"
                             " ORDER BY inbound_id, account_id").fetchall() == LISTED_BY_NUMBER
        # The suppression its STOP made in c stays: an upgrade undoes no opt-out.
        assert check.execute("SELECT account_id FROM suppressions").fetchall() == [(3,)]
    finally:
        check.close()


def test_version_19_gives_existing_messages_and_campaigns_no_validity(tmp_path: Path) -> None:
    old = tmp_path / "v5.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / "v5.sql").read_text())
    conn.execute("PRAGMA user_version=5")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0)")
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, created_at, updated_at) VALUES ('queued', 1, 'p',"
        " '+905321234567', 'x', 'QUEUED', 0, 0, 0, 0)")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old), readonly=True)
    try:
        assert check.execute("SELECT ref, state, expires_at FROM messages").fetchall() == [
            ("queued", "QUEUED", None)]
        columns = [r[1] for r in check.execute("PRAGMA table_info(campaigns)")]
        assert "validity_s" in columns
    finally:
        check.close()


def test_version_21_keeps_waiting_outbox_events_going_to_the_webhooks_receiver(
        tmp_path: Path) -> None:
    """Version 21 (TEAM-2) on a version-20 file: the events written before go to the
    ``[webhooks]`` receiver (``receiver`` 0) and stay due; accounts have no receiver of
    their own until given one."""
    old = tmp_path / "v20.db"
    at_version(old, 20)
    conn = apsw.Connection(str(old))
    conn.execute(
        "INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
        " INSERT INTO webhook_receiver (id, url, enabled, consecutive_failures, paused_until,"
        " updated_at) VALUES (1, 'http://127.0.0.1:9/', 1, 2, 5000, 0);"
        " INSERT INTO webhook_outbox (event_id, message_id, ref, state, at, next_try_at,"
        " delivered_at) VALUES ('evt_1', 7, 'r', 'QUEUED', 5, 5, NULL),"
        " ('evt_2', 7, 'r', 'SUBMITTED', 6, NULL, NULL), ('evt_0', 6, 'q', 'QUEUED', 1, NULL, 2)")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    migrate(str(fresh))
    assert shape(old) == shape(fresh)
    check = open_connection(str(old))
    try:
        assert check.execute("SELECT event_id, receiver, inbound_id FROM webhook_outbox"
                             " ORDER BY id").fetchall() == [
            ("evt_1", 0, None), ("evt_2", 0, None), ("evt_0", 0, None)]
        assert check.execute("SELECT count(*) FROM account_receivers").fetchall() == [(0,)]
        due, _ = due_events(check, 10, 10, 0)
        assert [(e.event_id, e.receiver, e.type) for e in due] == [
            ("evt_1", 0, "message.status")]
        assert outbox_health(check, 10).waiting == 2
        assert set_receiver(check, "http://127.0.0.1:9/", 10) == Gate(2, 5000)
    finally:
        check.close()


def test_version_23_lets_a_campaign_part_way_go_on_from_where_it_had_got_by_id(
        tmp_path: Path) -> None:
    """Version 23 on a version-22 file: a campaign part-way keeps its position by id
    (``queued_through``) and has no number position yet, so it is still expanding and
    its next chunk is the rest of its contacts after that id."""
    old = tmp_path / "v22.db"
    at_version(old, 22)
    conn = apsw.Connection(str(old))
    conn.execute(
        "INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
        " INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0);"
        " INSERT INTO contacts (id, list_id, msisdn, created_at) VALUES"
        " (1, 1, '+905320000009', 0), (2, 1, '+905320000001', 0), (3, 1, '+905320000005', 0);"
        " INSERT INTO campaigns (id, account_id, list_id, provider, body, idempotency_key,"
        " state, total, queued_through, last_contact_id, created_at, updated_at)"
        " VALUES (1, 1, 1, 'sim', 'b', 'k', 'RUNNING', 3, 1, 3, 0, 0)")
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    check = open_connection(str(old))
    try:
        with check:
            campaign = get_campaign(check, 1)
            assert campaign is not None and campaign.queued_after is None
            assert not campaign.expanded and next_to_expand(check) == campaign
            assert expand_chunk(check, campaign, iter(["R1", "R2"]).__next__, 0) == 2
        assert check.execute("SELECT msisdn FROM messages ORDER BY id").fetchall() == [
            ("+905320000001",), ("+905320000005",)]
        done = get_campaign(check, 1)
        assert done is not None and done.expanded
    finally:
        check.close()


def test_version_24_keeps_the_live_keys_and_frees_the_ended_ones(tmp_path: Path) -> None:
    """Version 24 on a version-23 file: a live keyed message still blocks its key (the
    number's index now holds it), one that had ended no longer does, and one that ends
    after the upgrade frees its key too."""
    old = tmp_path / "v23.db"
    at_version(old, 23)
    conn = apsw.Connection(str(old))
    rows = [("live", "+905320000001", "QUEUED", "20260310/1/+905320000001/k"),
            ("failed", "+905320000002", "FAILED", "20260310/1/+905320000002/k"),
            ("cancelled", "+905320000003", "CANCELLED", "20260310/1/+905320000003/k"),
            ("sent", "+905320000004", "SUBMITTED", "20260310/1/+905320000004/k")]
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0)")
    conn.executemany(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
        " next_attempt_at, created_at, updated_at, dup_key) VALUES (?, 1, 'p', ?, 'x', ?,"
        " 0, 0, 0, ?)", rows)
    conn.close()
    assert migrate(str(old)) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    migrate(str(fresh))
    assert shape(old) == shape(fresh)
    check = open_connection(str(old))
    insert = ("INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
              " next_attempt_at, created_at, updated_at, dup_key) VALUES (?, 1, 'p', ?, 'x',"
              " 'QUEUED', 0, 0, 0, ?)")
    try:
        assert check.execute("SELECT ref FROM messages WHERE dup_key IS NOT NULL"
                             " ORDER BY ref").fetchall() == [("live",), ("sent",)]
        for ref, msisdn, state, key in rows:
            if state in ("QUEUED", "SUBMITTED"):
                with pytest.raises(apsw.ConstraintError):
                    check.execute(insert, (f"again-{ref}", msisdn, key))
            else:
                check.execute(insert, (f"again-{ref}", msisdn, key))
        check.execute("UPDATE messages SET state = 'REJECTED' WHERE ref = 'sent'")
        check.execute(insert, ("again-sent", "+905320000004", rows[3][3]))
    finally:
        check.close()
