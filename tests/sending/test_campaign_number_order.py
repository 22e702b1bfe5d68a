"""A campaign's messages are created in the order of its list's numbers.

Whatever order the list was imported in, each chunk is the next run of the list's
numbers (byte order) after the campaign's position, read along the list's index; the
position survives between units, a contact added after the campaign is never in it, and
a campaign part-way when the appliance was upgraded (its position an id, from before
numbers were the order) gets exactly the messages it still lacked. On SQLite and
PostgreSQL alike.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.sending.campaign_messages import expand_chunk
from appliance.sending.campaigns import Campaign, NewCampaign, create_campaign, get_campaign
from appliance.store import pg_schema
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.schema import migrate, open_connection
from tests.pg_server import PgServer, pg_server, pg_url
from tests.query_plans import table_reads, traced

__all__ = ["PgServer", "pg_server", "pg_url"]

# Numbers of several lengths and countries, so byte order is not the order of values.
NUMBERS = sorted({f"+90532{n:07d}" for n in random.Random(7).sample(range(10**7), 40)}
                 | {"+447911123456", "+4915112345678", "+12025550123", "+905320000000"})


def _list(conn: Connection, numbers: list[str]) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (1, 'l', 0)")
    for msisdn in numbers:
        conn.execute("INSERT INTO contacts (list_id, msisdn, name, created_at)"
                     " VALUES (1, ?, NULL, 0)", (msisdn,))


def _campaign(conn: Connection, cid: int) -> Campaign:
    found = get_campaign(conn, cid)
    assert found is not None
    return found


def _numbers_by_id(conn: Connection) -> list[str]:
    rows: list[Any] = conn.execute("SELECT msisdn FROM messages ORDER BY id").fetchall()
    return [str(r[0]) for r in rows]


def _in_number_order_chunk_by_chunk(conn: Connection) -> None:
    shuffled = list(NUMBERS)
    random.Random(30).shuffle(shuffled)
    _list(conn, shuffled)
    made, _ = create_campaign(conn, NewCampaign(1, "l", "sim", "Merhaba", "k"), 0)
    refs = (f"R{i}" for i in itertools.count())
    # After the campaign: its number sorts among the others, but it is not the campaign's.
    conn.execute("INSERT INTO contacts (list_id, msisdn, created_at)"
                 " VALUES (1, '+905320000001', 0)")
    done: list[str] = []
    while not (campaign := _campaign(conn, made.id)).expanded:
        created = expand_chunk(conn, campaign, lambda: next(refs), 0, chunk=7)
        # A second expander (or the unit run again) at the position it read: nothing.
        assert expand_chunk(conn, campaign, lambda: next(refs), 0, chunk=7) == 0
        before, done = len(done), _numbers_by_id(conn)
        # Each chunk is the next run of numbers after the position, which it moves to.
        assert created == len(done) - before and 0 < created <= 7
        assert done == sorted(NUMBERS)[:len(done)]
        assert _campaign(conn, made.id).queued_after == done[-1]
    assert done == sorted(NUMBERS) and made.total == len(NUMBERS)


def _part_way_at_the_upgrade(conn: Connection) -> None:
    """A campaign whose first contacts by id had their messages before the upgrade
    (``queued_through`` an id, no ``queued_after``) gets exactly the others."""
    shuffled = list(NUMBERS)
    random.Random(31).shuffle(shuffled)
    _list(conn, shuffled)
    made, _ = create_campaign(conn, NewCampaign(1, "l", "sim", "Merhaba", "k"), 0)
    ids: list[Any] = conn.execute("SELECT id, msisdn FROM contacts ORDER BY id").fetchall()
    first = [str(r[1]) for r in ids[:11]]
    for i, msisdn in enumerate(first):
        conn.execute("INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn,"
                     " body, state, next_attempt_at, created_at, updated_at)"
                     " VALUES (?, 1, ?, 'sim', ?, 'Merhaba', 'QUEUED', 0, 0, 0)",
                     (f"OLD{i}", made.id, msisdn))
    conn.execute("UPDATE campaigns SET queued_through = ? WHERE id = ?",
                 (int(ids[10][0]), made.id))
    refs = (f"R{i}" for i in itertools.count())
    created = 0
    while not (campaign := _campaign(conn, made.id)).expanded:
        created += expand_chunk(conn, campaign, lambda: next(refs), 0, chunk=5)
    rest = sorted(set(NUMBERS) - set(first))
    assert created == len(rest)
    assert _numbers_by_id(conn) == first + rest
    rows: list[Any] = conn.execute("SELECT count(*), count(DISTINCT msisdn) FROM messages"
                                   " WHERE campaign_id = ?", (made.id,)).fetchall()
    assert tuple(rows[0]) == (len(NUMBERS), len(NUMBERS))


def _sqlite(tmp_path: Path) -> Iterator[apsw.Connection]:
    path = str(tmp_path / "a.db")
    migrate(path)
    conn = open_connection(path)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgConnection]:
    conn = PgConnection.connect(pg_url)
    try:
        pg_schema.migrate(conn)
        yield conn
    finally:
        conn.close()


def test_a_list_in_no_order_gets_its_messages_in_number_order_on_sqlite(
        tmp_path: Path) -> None:
    for conn in _sqlite(tmp_path):
        with conn:
            _in_number_order_chunk_by_chunk(conn)


def test_a_list_in_no_order_gets_its_messages_in_number_order_on_postgresql(
        pg: PgConnection) -> None:
    _in_number_order_chunk_by_chunk(pg)


def test_a_campaign_part_way_at_the_upgrade_gets_exactly_the_rest_on_sqlite(
        tmp_path: Path) -> None:
    for conn in _sqlite(tmp_path):
        with conn:
            _part_way_at_the_upgrade(conn)


def test_a_campaign_part_way_at_the_upgrade_gets_exactly_the_rest_on_postgresql(
        pg: PgConnection) -> None:
    _part_way_at_the_upgrade(pg)


def test_a_chunk_is_read_along_the_lists_index_without_sorting_the_list(
        tmp_path: Path) -> None:
    """SQLite (no statistics, as the appliance runs) reads a chunk's contacts from the
    position along ``UNIQUE (list_id, msisdn)``: neither the whole rest of the list nor
    a sort of it for every chunk."""
    for conn in _sqlite(tmp_path):
        with conn:
            _list(conn, NUMBERS)
            made, _ = create_campaign(conn, NewCampaign(1, "l", "sim", "Merhaba", "k"), 0)
        ran = traced(conn)
        with conn:
            assert expand_chunk(conn, made, iter(["R1", "R2", "R3", "R4", "R5"]).__next__,
                                0, chunk=5) == 5
        conn.exec_trace = None
        chunk_reads = [(sql, b) for sql, b in ran if "FROM contacts c" in sql]
        assert len(chunk_reads) == 1, ran
        sql, bindings = chunk_reads[0]
        assert table_reads(conn, sql, bindings, "c") == [
            "SEARCH c USING INDEX sqlite_autoindex_contacts_1 (list_id=? AND msisdn>?)"]
        steps = [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)]
        assert not any("TEMP B-TREE" in s for s in steps), steps


def _consent_looked_up_with_the_contact(conn: Connection) -> None:
    """A commercial campaign in Turkey: each contact's consent is read with it, so exactly
    the numbers allowed (ONAY, or a TACIR that has not refused) are queued; the others
    are created CANCELLED with their reason, suppression first."""
    people = {"+905320000001": ("ONAY", "BIREYSEL"), "+905320000002": ("RET", "BIREYSEL"),
              "+905320000003": ("ONAY", "TACIR"), "+905320000004": ("RET", "TACIR"),
              "+905320000005": None, "+905320000006": ("ONAY", "BIREYSEL")}
    _list(conn, list(reversed(people)))
    for msisdn, record in people.items():
        if record is not None:
            conn.execute("INSERT INTO consents (account_id, msisdn, status, recipient_type,"
                         " consented_at, received_at) VALUES (1, ?, ?, ?, 1, 1)",
                         (msisdn, *record))
    conn.execute("INSERT INTO suppressions (account_id, msisdn, source, created_at)"
                 " VALUES (1, '+905320000006', 'api', 0)")
    made, _ = create_campaign(conn, NewCampaign(1, "l", "sim", "Indirim", "k",
                                                message_type="commercial"), 0)
    refs = (f"R{i}" for i in itertools.count())
    while not (campaign := _campaign(conn, made.id)).expanded:
        expand_chunk(conn, campaign, lambda: next(refs), 0, chunk=4, consent_gate=True,
                     sender="ACME")
    rows: list[Any] = conn.execute("SELECT msisdn, state, error FROM messages"
                                   " ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [
        ("+905320000001", "QUEUED", None), ("+905320000002", "CANCELLED", "no_consent"),
        ("+905320000003", "QUEUED", None), ("+905320000004", "CANCELLED", "no_consent"),
        ("+905320000005", "CANCELLED", "no_consent"),
        ("+905320000006", "CANCELLED", "suppressed")]


def test_a_commercial_campaign_reads_each_contacts_consent_with_it_on_sqlite(
        tmp_path: Path) -> None:
    for conn in _sqlite(tmp_path):
        with conn:
            _consent_looked_up_with_the_contact(conn)


def test_a_commercial_campaign_reads_each_contacts_consent_with_it_on_postgresql(
        pg: PgConnection) -> None:
    _consent_looked_up_with_the_contact(pg)
