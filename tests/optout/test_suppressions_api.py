"""The suppression list through the API: add, search, page, remove, upload; a send to a
suppressed number is 409 with nothing queued; a queued or retrying message whose number
is suppressed later is cancelled, never sent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import apsw
import httpx
import pytest

from tests.harness import FileClock, Server, create_account, free_port
from tests.sending.support import provider_config, send, wait_state


@dataclass
class Rig:
    server: Server
    clock: FileClock
    alpha: httpx.Client
    beta: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    # The provider points at a closed port: messages go to RETRY and are never sent.
    tmp = tmp_path_factory.mktemp("suppressions")
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", int(time.time() * 1000))
    cfg = provider_config(tmp / "cfg.toml", f"http://127.0.0.1:{free_port()}")
    server = Server(data, config=cfg, env=clock.env).start()
    a, b = create_account(data, "alpha"), create_account(data, "beta")
    try:
        with server.client(a) as alpha, server.client(b) as beta:
            yield Rig(server, clock, alpha, beta)
    finally:
        server.stop()


def test_adding_is_idempotent_and_normalised_like_imports(rig: Rig) -> None:
    first = rig.alpha.post("/api/suppressions", json={"msisdn": "0532 100 00 01",
                                                      "reason": "asked by phone"})
    assert first.status_code == 201, first.text
    entry = first.json()
    assert (entry["msisdn"], entry["reason"], entry["source"]) == (
        "+905321000001", "asked by phone", "api")
    again = rig.alpha.post("/api/suppressions", json={"msisdn": "+90 532 100 0001",
                                                      "reason": "other"})
    assert again.status_code == 200
    assert again.json() == entry  # the existing entry, unchanged
    # Another account's list is its own.
    listed = rig.beta.get("/api/suppressions", params={"msisdn": "+905321000001"}).json()
    assert listed["suppressions"] == [] and listed["total"] == 0


@pytest.mark.parametrize(("payload", "status", "error"), [
    ({"msisdn": "12"}, 422, "invalid_msisdn"),
    ({"msisdn": "not a number"}, 422, "invalid_msisdn"),
    ({"msisdn": 905321234567}, 422, "invalid_msisdn"),
    ({}, 422, "invalid_msisdn"),
    ({"msisdn": "+905321000002", "reason": 5}, 422, "invalid_reason"),
    ({"msisdn": "+905321000002", "reason": "x" * 501}, 422, "invalid_reason"),
])
def test_bad_entries_are_refused_with_the_reason(rig: Rig, payload: dict[str, object],
                                                 status: int, error: str) -> None:
    r = rig.alpha.post("/api/suppressions", json=payload)
    assert r.status_code == status, r.text
    assert r.json()["error"] == error and r.json()["message"]


def test_bodies_that_are_not_json_or_a_list_are_4xx(rig: Rig) -> None:
    assert rig.alpha.post("/api/suppressions", content=b"{nope",
                          headers={"Content-Type": "application/json"}).status_code == 400
    assert rig.alpha.post("/api/suppressions", content=b"[1]",
                          headers={"Content-Type": "application/json"}).status_code == 400
    assert rig.alpha.post("/api/suppressions", content=b"msisdn=1",
                          headers={"Content-Type": "application/x-www-form-urlencoded"}
                          ).status_code == 415
    assert rig.alpha.post("/api/suppressions", content=b"\xff\xfe\xff",
                          headers={"Content-Type": "text/csv"}).status_code == 400
    empty = rig.alpha.post("/api/suppressions", content=b"\n\n",
                           headers={"Content-Type": "text/plain"})
    assert empty.status_code == 422 and empty.json()["error"] == "empty_list"
    with httpx.Client(base_url=rig.server.url) as anon:
        assert anon.get("/api/suppressions").status_code == 401
        assert anon.post("/api/suppressions", json={"msisdn": "+905321000003"}
                         ).status_code == 401
        assert anon.delete("/api/suppressions/+905321000003").status_code == 401
        assert anon.get("/api/inbound").status_code == 401


def test_csv_upload_counts_added_already_and_rejected_lines(rig: Rig) -> None:
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321100009"}).raise_for_status()
    csv_text = (
        "phone;reason\n"
        "+90 532 110 00 01;complained\n"
        "05321100002\n"
        "\n"
        "not a number;x\n"
        "0532 110 00 03 ext 12\n"
        '"+905321100004","said ""stop"" on the phone"\n'
        "+905321100001;again\n"  # a repeat in the same upload
        "+905321100009\n"  # already on the list
        "12\n"
    )
    r = rig.alpha.post("/api/suppressions", content=csv_text.encode(),
                       headers={"Content-Type": "text/csv"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["added"], got["already"], got["rejected"]) == (3, 2, 3)
    assert (got["lines"], got["blank"], got["header_skipped"]) == (10, 1, 1)
    assert [(x["line_number"], x["reason"]) for x in got["rejects"]] == [
        (5, "letters in number"), (6, "extension not allowed"), (10, "too short")]
    listed = {e["msisdn"]: e for e in rig.alpha.get(
        "/api/suppressions", params={"msisdn": "53211000"}).json()["suppressions"]}
    assert set(listed) == {"+905321100001", "+905321100002", "+905321100004",
                           "+905321100009"}
    assert listed["+905321100001"]["reason"] == "complained"
    assert listed["+905321100002"]["reason"] == "imported"
    assert listed["+905321100004"]["reason"] == 'said "stop" on the phone'
    assert listed["+905321100001"]["source"] == "import"
    assert listed["+905321100009"]["source"] == "api"
    # The same upload again adds nothing; a region reads national numbers.
    again = rig.alpha.post("/api/suppressions", content=csv_text.encode(),
                           headers={"Content-Type": "text/csv"}).json()
    assert again["added"] == 0 and again["already"] == 5
    gb = rig.alpha.post("/api/suppressions?region=GB", content=b"07911 123456\n",
                        headers={"Content-Type": "text/plain"}).json()
    assert gb["added"] == 1
    assert rig.alpha.get("/api/suppressions", params={"msisdn": "+447911123456"}
                         ).json()["total"] == 1


def test_list_is_paged_newest_first_and_searchable(rig: Rig) -> None:
    numbers = [f"+9053212000{i:02d}" for i in range(7)]
    rig.beta.post("/api/suppressions", content="\n".join(numbers).encode(),
                  headers={"Content-Type": "text/plain"}).raise_for_status()
    seen: list[str] = []
    url: str | None = "/api/suppressions?limit=3"
    pages = 0
    while url:
        page = rig.beta.get(url).json()
        assert page["total"] == 7
        seen += [e["msisdn"] for e in page["suppressions"]]
        url = page["next"]
        pages += 1
    assert pages == 3 and seen == list(reversed(numbers))
    found = rig.beta.get("/api/suppressions", params={"msisdn": "0532 120 00 03"}).json()
    assert [e["msisdn"] for e in found["suppressions"]] == ["+905321200003"]
    digits = rig.beta.get("/api/suppressions", params={"msisdn": "2000-0"}).json()
    assert digits["total"] == 7
    assert rig.beta.get("/api/suppressions", params={"limit": "0"}).status_code == 422
    assert rig.beta.get("/api/suppressions", params={"msisdn": "abc"}).status_code == 422


def test_removing_gives_the_entry_and_sending_works_again(rig: Rig) -> None:
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321300001"}).raise_for_status()
    refused = rig.alpha.post("/api/messages", json={"to": "+905321300001", "body": "hi"})
    assert refused.status_code == 409
    gone = rig.alpha.delete("/api/suppressions/0532%20130%2000%2001")
    assert gone.status_code == 200 and gone.json()["removed"]["msisdn"] == "+905321300001"
    assert rig.alpha.delete("/api/suppressions/%2B905321300001").status_code == 404
    assert rig.alpha.delete("/api/suppressions/garbage").status_code == 404
    assert rig.alpha.post("/api/messages", json={"to": "+905321300001", "body": "hi"}
                          ).status_code == 202


def test_a_send_to_a_suppressed_number_is_409_and_nothing_is_queued(rig: Rig) -> None:
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321400001",
                                              "reason": "complained"}).raise_for_status()
    r = rig.alpha.post("/api/messages", json={"to": "0532 140 00 01", "body": "hi"},
                       headers={"Idempotency-Key": "to-suppressed"})
    assert r.status_code == 409, r.text
    body = r.json()
    assert (body["error"], body["reason"], body["msisdn"]) == (
        "suppressed", "complained", "+905321400001")
    assert body["message"]
    assert rig.alpha.get("/api/messages", params={"msisdn": "+905321400001"}
                         ).json()["messages"] == []
    # Only that account's list counts.
    assert rig.beta.post("/api/messages", json={"to": "+905321400001", "body": "hi"}
                         ).status_code == 202


def test_a_repeat_of_an_accepted_send_gives_back_its_message(rig: Rig) -> None:
    first = rig.alpha.post("/api/messages", json={"to": "+905321400002", "body": "hi"},
                           headers={"Idempotency-Key": "before-suppression"})
    assert first.status_code == 202
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321400002"}).raise_for_status()
    again = rig.alpha.post("/api/messages", json={"to": "+905321400002", "body": "hi"},
                           headers={"Idempotency-Key": "before-suppression"})
    assert again.status_code == 202 and again.json()["ref"] == first.json()["ref"]


def db(rig: Rig) -> apsw.Connection:
    conn = apsw.Connection(str(rig.server.data_dir / "appliance.db"),
                           flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    return conn


def test_a_retrying_message_suppressed_later_is_cancelled_not_sent(rig: Rig) -> None:
    ref = send(rig.alpha, "+905321500001")
    waiting = wait_state(rig.alpha, ref, "RETRY")
    attempts = waiting["attempts"]
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321500001"}).raise_for_status()
    rig.clock.advance(3_600_000)  # its next attempt is due
    done = wait_state(rig.alpha, ref, "CANCELLED")
    assert done["error"] == "suppressed" and done["final"] is True
    assert done["attempts"] == attempts  # claimed, not attempted
    assert done["finalised_at"] is not None


def test_metrics_count_suppressions_by_source(rig: Rig) -> None:
    rig.alpha.post("/api/suppressions", json={"msisdn": "+905321600001"}).raise_for_status()
    text = rig.server.client().get("/metrics").text

    def value(source: str) -> float:
        line = next(x for x in text.splitlines()
                    if x.startswith(f'appliance_suppressions{{source="{source}"}}'))
        return float(line.split()[-1])

    conn = db(rig)
    try:
        by_source = dict(conn.execute("SELECT source, count(*) FROM suppressions GROUP BY 1"))
    finally:
        conn.close()
    assert value("api") == by_source["api"] >= 1
    assert value("import") == by_source["import"]
    assert value("inbound") == 0


def test_path_param_and_pages_never_5xx(rig: Rig) -> None:
    for bad in ("%00", "..%2F..", "+" * 70, "1" * 70):
        assert rig.alpha.delete(f"/api/suppressions/{bad}").status_code == 404
    for query in ({"before": "x"}, {"before": "9" * 30}, {"limit": "5000"}, {"msisdn": "x" * 99}):
        assert rig.alpha.get("/api/suppressions", params=query).status_code == 422
        assert rig.alpha.get("/api/inbound", params=query).status_code == 422
