"""ENC-1 in the store, on both engines: the dry run groups numbers by the Turkish
prefixes, expansion gives each message its own encoding, and a campaign's progress
reads its encodings and what UCS-2 would take from its covering index."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.sending.campaign_messages import expand_chunk
from appliance.sending.campaigns import (
    NewCampaign,
    campaign_progress,
    create_campaign,
    get_campaign,
)
from appliance.sending.dry_run import dry_run
from appliance.store import pg_schema
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.schema import migrate, open_connection
from tests.pg_server import PgServer, pg_server, pg_url

__all__ = ["PgServer", "pg_server", "pg_url"]

TURKISH = ("Merhaba {name}, kampanyamız başladı! Bu hafta tüm ürünlerde yüzde yirmi indirim"
           " var, kaçırmayın")
NUMBERS = [("+905321000001", "Ayşe"), ("+905321000002", "Ali"), ("+447911123456", "Jo")]


def _fill(conn: Connection) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (1, 'l', 0)")
    for msisdn, name in NUMBERS:
        conn.execute("INSERT INTO contacts (list_id, msisdn, name, created_at)"
                     " VALUES (1, ?, ?, 0)", (msisdn, name))


def _check(conn: Connection) -> None:
    plan = dry_run(conn, 1, "l", "sim", TURKISH, turkish_prefixes=("+90",))
    assert (plan.encoding, plan.messages, plan.parts, plan.ucs2_parts) == ("UCS-2", 3, 4, 6)
    assert plan.turkish_messages == 2 and plan.ucs2_messages == 1
    plain = dry_run(conn, 1, "l", "sim", TURKISH)
    assert (plain.parts, plain.ucs2_parts) == (6, 6)
    campaign, _ = create_campaign(
        conn, NewCampaign(1, "l", "sim", TURKISH, "k", planned_parts=plan.parts), 0)
    assert campaign_progress(conn, campaign).parts == 4  # the plan, before any message
    refs = (f"REF{i}" for i in itertools.count())
    assert expand_chunk(conn, campaign, lambda: next(refs), 0,
                        turkish_prefixes=("+90",)) == 3
    rows = conn.execute("SELECT msisdn, encoding, parts, ucs2_parts FROM messages"
                        " ORDER BY msisdn").fetchall()
    assert [tuple(r) for r in rows] == [("+447911123456", "UCS-2", 2, 2),
                                        ("+905321000001", "GSM-7 Turkish", 1, 2),
                                        ("+905321000002", "GSM-7 Turkish", 1, 2)]
    campaign = get_campaign(conn, campaign.id) or campaign
    done = campaign_progress(conn, campaign)
    assert (done.encoding, done.parts, done.ucs2_parts) == ("UCS-2", 4, 6)
    conn.execute("UPDATE messages SET ucs2_parts = NULL WHERE msisdn = '+447911123456'")
    assert campaign_progress(conn, campaign).ucs2_parts is None  # made before: unknown


def test_on_sqlite(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    migrate(path)
    conn = open_connection(path)
    try:
        with conn:
            _fill(conn)
            _check(conn)
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


def test_on_postgresql(pg: PgConnection) -> None:
    _fill(pg)
    _check(pg)
