"""The İYS fields and refusals in the store, on both engines: the claim reads each
commercial message's recipient type from its consent record in force (BIREYSEL, TACIR,
none for a transactional one or a number without a record); a refusal for İYS recorded
from the send answer leaves the message ``REJECTED`` with ``error_kind`` ``iys`` (any
other refusal none), counted on its campaign and in the summary's ``iys_refused``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.config import Settings
from appliance.optout.consents import ConsentRecord, apply_one
from appliance.providers import Outcome, SubmitResult
from appliance.reports.coverage import iys_refused
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.campaigns import campaign_progress, get_campaign
from appliance.sending.claims import claim_due, mark_sending
from appliance.sending.outcomes import record_outcomes
from appliance.store import Store
from appliance.store.connection import Connection

NOW = 10**12
NUMBERS = {"+905327770001": "BIREYSEL", "+905327770002": "TACIR", "+905327770003": None}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store[Connection]]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else ""
    opened = Store.open(Settings(data_dir=tmp_path, database_url=url, read_connections=1))
    try:
        yield opened
    finally:
        opened.close()


def _setup(conn: Connection) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    conn.execute("INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0)")
    conn.execute("INSERT INTO campaigns (id, account_id, list_id, provider, body,"
                 " idempotency_key, state, total, queued_through, last_contact_id,"
                 " created_at, updated_at, personalised, message_type) VALUES"
                 " (1, 1, 1, 'sim', 'b', 'k', 'RUNNING', 4, 0, 0, 0, 0, 0, 'commercial')")
    for number, kind in NUMBERS.items():
        if kind is not None:
            apply_one(conn, 1, ConsentRecord(number, "ONAY", kind, "HS_WEB", 1), 1)
        insert_message(conn, NewMessage(1, "sim", number, "Kampanya RET mersis",
                                        message_type="commercial"), f"C{number[-1]}", 1)
    insert_message(conn, NewMessage(1, "sim", "+905327770001", "Kodunuz 1",
                                    message_type="transactional"), "T1", 1)
    conn.execute("UPDATE messages SET campaign_id = 1, priority = 1 WHERE ref LIKE 'C%'")


def test_the_claim_reads_the_recipient_type_and_an_iys_refusal_is_kept_and_counted(
        store: Store[Connection]) -> None:
    store.writer.call(_setup)

    got = store.writer.call(lambda c: claim_due(c, "sim", NOW, 10))
    assert {m.ref: (m.message_type, m.recipient_type) for m in got} == {
        "C1": ("commercial", "BIREYSEL"), "C2": ("commercial", "TACIR"),
        "C3": ("commercial", None), "T1": ("transactional", None)}

    def send(conn: Connection) -> None:
        marked = mark_sending(conn, got, NOW)
        outcomes = {"C1": Outcome(SubmitResult.REJECTED, error="iys: 469",
                                  error_kind="iys"),
                    "C2": Outcome(SubmitResult.REJECTED, error="451 duplicate order"),
                    "C3": Outcome(SubmitResult.ACCEPTED, provider_msg_id="P3"),
                    "T1": Outcome(SubmitResult.ACCEPTED, provider_msg_id="P4")}
        record_outcomes(conn, "sim", [(m, outcomes[m.ref]) for m in marked], NOW,
                        max_attempts=3, dedupes_on_ref=False, map_provider_ids=False)

    store.writer.call(send)
    rows = store.readers.call(lambda c: c.execute(
        "SELECT ref, state, error_kind FROM messages ORDER BY ref").fetchall())
    assert [tuple(r) for r in rows] == [("C1", "REJECTED", "iys"), ("C2", "REJECTED", None),
                                        ("C3", "SUBMITTED", None), ("T1", "SUBMITTED", None)]

    def counted(conn: Connection) -> tuple[int, int, int]:
        campaign = get_campaign(conn, 1)
        assert campaign is not None
        return (campaign_progress(conn, campaign, NOW).iys_refused,
                iys_refused(conn, 0, 1), iys_refused(conn, 0, 2))

    assert store.readers.call(counted) == (1, 1, 0)

