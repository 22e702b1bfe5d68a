"""The same Idempotency-Key sent to two processes at once (SCALE-1): the second request
waits for the first's unit and gets what it made, as a retry after it would, never a
constraint error (a 500). One test per thing a key makes: an import job (new, or a
re-run of one), a message and a campaign."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from appliance.imports.import_job import NewJob, create_job, ensure_list, rerun_job
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.campaigns import NewCampaign, create_campaign
from appliance.store.pg import PgConnection
from tests.store.pg.paused import UnitThread

Unit = Callable[[PgConnection], Any]


def job_unit(conn: PgConnection) -> bool:
    new = NewJob(1, "people", "TR", "key-1", b"+905321000001\n", "text/plain", 1)
    return create_job(conn, new, 5)[1]


def rerun_unit(conn: PgConnection) -> bool:
    return rerun_job(conn, 1, 1, "people-2", "key-2", 5)[1]


def message_unit(conn: PgConnection) -> bool:
    new = NewMessage(1, "sim", "+905321000001", "hello", idempotency_key="key-1")
    return insert_message(conn, new, f"ref-{threading.get_ident()}", 5).created


def campaign_unit(conn: PgConnection) -> bool:
    new = NewCampaign(1, "people", "sim", "hello", "key-1")
    return create_campaign(conn, new, 5)[1]


@pytest.mark.parametrize("unit", [job_unit, rerun_unit, message_unit, campaign_unit],
                         ids=["import job", "re-run", "message", "campaign"])
def test_the_same_key_at_two_processes_at_once_makes_one(
        two: tuple[PgConnection, PgConnection], unit: Unit) -> None:
    a, b = two
    a.execute("BEGIN")
    ensure_list(a, 1, "people", 0)
    job_unit(a)  # job 1, the one a re-run runs again
    a.execute("UPDATE import_jobs SET state = 'DONE', idempotency_key = 'first'")
    a.execute("COMMIT")
    a.execute("BEGIN")
    assert unit(a) is True
    other = UnitThread(b, unit).start()
    assert other.waits(), "B waits for A's unit under the same key"
    a.execute("COMMIT")
    other.finish()
    assert (other.value, other.error) == (False, None)  # not a constraint error: a 500
