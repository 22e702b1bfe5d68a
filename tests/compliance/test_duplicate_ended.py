"""IYS-4: a message that ended REJECTED, FAILED or CANCELLED gives up its duplicate-today
key, whatever statement ended it, so the same text may go to the number again that day;
a live one (queued, sending, submitted, delivered) keeps blocking it. On SQLite and
PostgreSQL alike (a trigger on each)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.campaign_messages import expand_chunk
from appliance.sending.campaigns import NewCampaign, create_campaign, get_campaign
from appliance.sending.duplicates import DuplicateToday, dup_key
from appliance.store import pg_schema
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.schema import SCHEMA_VERSION, migrate, open_connection
from tests.pg_server import PgServer, pg_server, pg_url

__all__ = ["PgServer", "pg_server", "pg_url"]

NOW = 1_773_100_000_000
TEXT = "Siparisiniz yola cikti"
# Each way a live message ends, as the appliance writes it: a cancel (the campaign's or
# an expiry), a provider's refusal, a failure; then a live state for contrast.
ENDINGS = {
    "+905320000001": ("UPDATE messages SET state = 'CANCELLED', error = 'cancelled',"
                      " finalised_at = ?, updated_at = ? WHERE ref = ?", True),
    "+905320000002": ("UPDATE messages SET state = 'REJECTED', error = 'iletimerkezi 469',"
                      " error_kind = 'iys', finalised_at = ?, updated_at = ? WHERE ref = ?",
                      True),
    "+905320000003": ("UPDATE messages SET state = 'FAILED', error = 'x', finalised_at = ?,"
                      " updated_at = ? WHERE ref = ?", True),
    "+905320000004": ("UPDATE messages SET state = 'SUBMITTED', submitted_at = ?,"
                      " updated_at = ? WHERE ref = ?", False),
}


def _send(conn: Connection, msisdn: str, ref: str) -> None:
    insert_message(conn, NewMessage(account_id=1, provider="sim", msisdn=msisdn, body=TEXT,
                                    dup_key=dup_key(1, msisdn, "ACME", NOW, TEXT)), ref, NOW)


def _ended_messages_block_nothing(conn: Connection) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    for i, (msisdn, (ending, _)) in enumerate(ENDINGS.items()):
        _send(conn, msisdn, f"first{i}")
        with pytest.raises(DuplicateToday):
            _send(conn, msisdn, f"early{i}")
        conn.execute(ending, (NOW, NOW, f"first{i}"))
    for i, (msisdn, (_, frees)) in enumerate(ENDINGS.items()):
        if frees:
            _send(conn, msisdn, f"again{i}")
        else:
            with pytest.raises(DuplicateToday):
                _send(conn, msisdn, f"again{i}")
    # Those sent again are cancelled by one statement over several messages; then a
    # campaign that day: the numbers whose messages ended get the text; the one still
    # live is a repeat, created CANCELLED without a key (it blocks nothing).
    conn.execute("UPDATE messages SET state = 'CANCELLED' WHERE ref LIKE 'again%'")
    conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (1, 'l', 0)")
    for msisdn in [*ENDINGS, "+905320000005"]:
        conn.execute("INSERT INTO contacts (list_id, msisdn, created_at) VALUES (1, ?, 0)",
                     (msisdn,))
    made, _ = create_campaign(conn, NewCampaign(1, "l", "sim", TEXT, "k"), NOW)
    refs = (f"C{i}" for i in itertools.count())
    while not (campaign := get_campaign(conn, made.id)) or not campaign.expanded:
        assert campaign is not None
        expand_chunk(conn, campaign, lambda: next(refs), NOW, sender="ACME")
    rows: list[Any] = conn.execute(
        "SELECT msisdn, state, error, dup_key IS NOT NULL FROM messages"
        " WHERE campaign_id = ? ORDER BY id", (made.id,)).fetchall()
    assert [tuple(r) for r in rows] == [
        ("+905320000001", "QUEUED", None, 1), ("+905320000002", "QUEUED", None, 1),
        ("+905320000003", "QUEUED", None, 1),
        ("+905320000004", "CANCELLED", "duplicate_today", 0),
        ("+905320000005", "QUEUED", None, 1)]
    # Cancelling the campaign (one statement over its messages) frees their keys.
    conn.execute("UPDATE messages SET state = 'CANCELLED' WHERE campaign_id = ?"
                 " AND state = 'QUEUED'", (made.id,))
    _send(conn, "+905320000005", "after-cancel")
    left: list[Any] = conn.execute("SELECT count(*) FROM messages WHERE dup_key IS NOT NULL"
                                   " AND state IN ('REJECTED', 'FAILED', 'CANCELLED')"
                                   ).fetchall()
    assert left[0][0] == 0


def _sqlite(tmp_path: Path) -> Iterator[apsw.Connection]:
    path = str(tmp_path / "a.db")
    migrate(path)
    conn = open_connection(path)
    try:
        yield conn
    finally:
        conn.close()


def test_an_ended_message_no_longer_blocks_the_same_text_that_day_on_sqlite(
        tmp_path: Path) -> None:
    for conn in _sqlite(tmp_path):
        with conn:
            _ended_messages_block_nothing(conn)


def test_an_ended_message_no_longer_blocks_the_same_text_that_day_on_postgresql(
        pg_url: str) -> None:
    conn = PgConnection.connect(pg_url)
    try:
        pg_schema.migrate(conn)
        conn.execute("BEGIN")
        _ended_messages_block_nothing(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_the_keys_are_looked_up_along_the_numbers_index_never_by_a_scan(
        tmp_path: Path) -> None:
    """A send's and a campaign's check (the keys by number) and the dry run's (a number's
    keys of the day) read ``messages_msisdn``; none scans ``messages``."""
    from appliance.sending.dry_run import dry_run
    from appliance.sending.duplicates import DayKeys, live_keys
    from tests.query_plans import table_reads, traced

    for conn in _sqlite(tmp_path):
        with conn:
            conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
            conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (1, 'l', 0)")
            conn.execute("INSERT INTO contacts (list_id, msisdn, created_at)"
                         " VALUES (1, '+905320000001', 0)")
            _send(conn, "+905320000001", "first")
        ran = traced(conn)
        key = dup_key(1, "+905320000001", "ACME", NOW, TEXT)
        assert live_keys(conn, 1, [("+905320000001", key)]) == {key}
        plan = dry_run(conn, 1, "l", "sim", TEXT, day_keys=DayKeys(1, "ACME", NOW))
        assert plan.duplicate_today == 1 and plan.messages == 0
        conn.exec_trace = None
        reads = [table_reads(conn, sql, b, "messages") + table_reads(conn, sql, b, "m")
                 for sql, b in ran if "dup_key" in sql]
        assert len(reads) == 3, ran
        for found in reads:
            assert found and all(r.startswith("SEARCH") and "messages_msisdn" in r
                                 for r in found), found


def test_a_version_23_database_on_postgresql_keeps_its_live_keys_and_frees_the_ended(
        pg_url: str) -> None:
    """Version 24's step on PostgreSQL: a database as version 23 left it (the partial
    unique index, no trigger, an ended message still carrying its key) migrates; the live
    key still blocks, the ended one no longer does, and ending a message frees its key."""
    from appliance.store.pg_schema import VERSION_TABLE

    conn = PgConnection.connect(pg_url)
    try:
        pg_schema.migrate(conn)
        conn.execute("DROP TRIGGER messages_ended_unkeyed ON messages")
        conn.execute("DROP INDEX messages_msisdn")
        conn.execute("CREATE INDEX messages_msisdn ON messages (account_id, msisdn)")
        conn.execute("CREATE UNIQUE INDEX messages_duplicate_today ON messages (dup_key)"
                     " WHERE dup_key IS NOT NULL"
                     " AND state NOT IN ('REJECTED', 'FAILED', 'CANCELLED')")
        conn.execute(f"UPDATE {VERSION_TABLE} SET version = 23")
        conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        live, ended = (dup_key(1, n, "ACME", NOW, TEXT) for n in ENDINGS_NUMBERS[:2])
        for ref, msisdn, state, key in (("live", ENDINGS_NUMBERS[0], "QUEUED", live),
                                        ("ended", ENDINGS_NUMBERS[1], "FAILED", ended)):
            conn.execute("INSERT INTO messages (ref, account_id, provider, msisdn, body,"
                         " state, next_attempt_at, created_at, updated_at, dup_key)"
                         " VALUES (?, 1, 'sim', ?, ?, ?, 0, 0, 0, ?)",
                         (ref, msisdn, TEXT, state, key))
        assert pg_schema.migrate(conn) == SCHEMA_VERSION
        conn.execute("BEGIN")
        with pytest.raises(DuplicateToday):
            _send(conn, ENDINGS_NUMBERS[0], "again-live")
        _send(conn, ENDINGS_NUMBERS[1], "again-ended")
        conn.execute("UPDATE messages SET state = 'REJECTED' WHERE ref = 'live'")
        _send(conn, ENDINGS_NUMBERS[0], "after-rejected")
        conn.execute("COMMIT")
        indexes = {str(r[0]) for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'messages'")}
        assert "messages_duplicate_today" not in indexes and "messages_msisdn" in indexes
    finally:
        conn.close()


ENDINGS_NUMBERS = list(ENDINGS)
