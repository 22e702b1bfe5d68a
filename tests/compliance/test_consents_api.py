"""Consents through the API (IYS-2): one record, an array, CSV with bad and conflicting
rows; a later RET wins over an earlier ONAY by consented_at, RET wins a tie, loading the
same records again changes nothing; refusals listed with received_at; the audit export;
another account's consents are its own."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import Server, create_account


@dataclass
class Rig:
    server: Server
    alpha: httpx.Client
    beta: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    data = tmp_path_factory.mktemp("consents") / "data"
    data.mkdir()
    server = Server(data).start()
    a, b = create_account(data, "alpha"), create_account(data, "beta")
    try:
        with server.client(a) as alpha, server.client(b) as beta:
            yield Rig(server, alpha, beta)
    finally:
        server.stop()


def test_one_record_then_a_later_refusal_then_an_older_consent_changes_nothing(
        rig: Rig) -> None:
    first = rig.alpha.post("/api/consents", json={
        "msisdn": "0532 200 00 01", "status": "ONAY", "recipient_type": "BIREYSEL",
        "source": "HS_WEB", "consented_at": "2024-01-10 10:00:00"})
    assert first.status_code == 201, first.text
    assert first.json()["msisdn"] == "+905322000001"
    assert first.json()["commercial_allowed"] is True
    ret = rig.alpha.post("/api/consents", json={
        "msisdn": "+905322000001", "status": "RET", "recipient_type": "BIREYSEL",
        "consented_at": "2024-02-01T09:00:00Z"})
    assert ret.status_code == 200 and ret.json()["result"] == "updated"
    older = rig.alpha.post("/api/consents", json={
        "recipient": "+905322000001", "status": "onay", "recipientType": "BİREYSEL",
        "consentDate": "2024-01-20 10:00:00"})
    assert older.json()["result"] == "unchanged"
    assert older.json()["status"] == "RET" and older.json()["commercial_allowed"] is False
    shown = rig.alpha.get("/api/consents", params={"msisdn": "0532 200 00 01"}).json()
    assert [h["status"] for h in shown["history"]] == ["ONAY", "ONAY", "RET"]
    assert rig.beta.get("/api/consents", params={"msisdn": "+905322000001"}).json()[
        "consents"] == []


@pytest.mark.parametrize(("record", "reason"), [
    ({"msisdn": "+905322000009", "status": "MAYBE", "recipient_type": "BIREYSEL"},
     "unknown status"),
    ({"msisdn": "+905322000009", "status": "ONAY", "recipient_type": "KURUM"},
     "unknown recipient_type"),
    ({"msisdn": "+905322000009", "status": "ONAY", "recipient_type": "TACIR",
      "consented_at": "2999-01-01T00:00:00Z"}, "in the future"),
    ({"msisdn": "not a number", "status": "ONAY", "recipient_type": "TACIR"},
     "msisdn is not a phone number"),
])
def test_a_bad_record_is_refused_with_its_reason_and_nothing_is_kept(
        rig: Rig, record: dict[str, str], reason: str) -> None:
    answer = rig.alpha.post("/api/consents", json=record)
    assert answer.status_code == 422
    assert answer.json()["error"] == "invalid_consent" and reason in answer.json()["reason"]
    assert rig.alpha.get("/api/consents", params={"msisdn": "+905322000009"}).json()[
        "consents"] == []


def test_a_csv_upload_applies_good_rows_rejects_bad_ones_and_is_idempotent(rig: Rig) -> None:
    # 20,000 rows prove what 100,000 would (the limit is MAX_ROWS, 100,000): the rows go
    # in units of 5,000, so four units and the conflicts inside and across them.
    n = 20_000
    lines = ["msisdn;status;recipient_type;source;consented_at"]
    for i in range(n):
        lines.append(f"+90533{i:07d};ONAY;BIREYSEL;HS_WEB;2024-01-01 10:00:00")
    # Conflicting rows: a later RET for every tenth number, a tie RET for the first.
    for i in range(0, n, 10):
        lines.append(f"+90533{i:07d};RET;BIREYSEL;HS_MESAJ;2024-03-01 10:00:00")
    lines.append("+905330000001;RET;BIREYSEL;HS_MESAJ;2024-01-01 10:00:00")
    lines += ["+905339999999;YES;BIREYSEL;x;", "12;ONAY;BIREYSEL;x;",
              "+905339999998;ONAY;ESNAF;x;", "+905339999997;ONAY;TACIR;x;2999-01-01"]
    body = ("\n".join(lines) + "\n").encode()
    headers = {"content-type": "text/csv"}
    first = rig.alpha.post("/api/consents", content=body, headers=headers, timeout=120)
    assert first.status_code == 200, first.text
    got = first.json()
    assert (got["added"], got["rejected"]) == (n, 4)
    assert got["updated"] == n // 10 + 1
    assert [r["line_number"] for r in got["rejects"]] == list(range(len(lines) - 3,
                                                                  len(lines) + 1))
    again = rig.alpha.post("/api/consents", content=body, headers=headers, timeout=120).json()
    assert (again["added"], again["updated"], again["unchanged"]) == (0, 0, got["added"]
                                                                       + got["updated"]
                                                                       + got["unchanged"])
    refusals = rig.alpha.get("/api/consents", params={"status": "RET", "limit": 5}).json()
    assert refusals["total"] >= n // 10 + 1  # and the first test's, when it ran
    assert all(c["received_at"] and c["last_commercial_at"] is None
               for c in refusals["consents"])
    export = rig.alpha.get("/api/consents.csv", timeout=60)
    rows = list(csv.reader(io.StringIO(export.text)))
    assert rows[0][:3] == ["msisdn", "status", "recipient_type"]
    by_number = {r[0].lstrip("'"): r for r in rows[1:]}  # "'+90..." opens as text
    assert len(by_number) >= n
    assert by_number["+905330000000"][1] == "RET" and by_number["+905330000002"][1] == "ONAY"
    assert by_number["+905330000001"][1] == "RET"  # the tie on consented_at


def test_a_json_array_names_each_bad_item(rig: Rig) -> None:
    answer = rig.alpha.post("/api/consents", json=[
        {"msisdn": "+905344000001", "status": "ONAY", "recipient_type": "TACIR"},
        {"msisdn": "+905344000002", "status": "ONAY"},
        "nonsense"])
    got = answer.json()
    assert (got["added"], got["rejected"]) == (1, 2)
    assert [r["line_number"] for r in got["rejects"]] == [2, 3]


@pytest.mark.parametrize("path", ["/api/consents", "/api/suppressions"])
@pytest.mark.parametrize("body", [
    b'{"msisdn": ' + b"7" * 5000 + b"}",  # past int()'s digit limit
    b'{"msisdn": NaN}',
    b"[" * 5000 + b"]" * 5000,
    b'{"msisdn": "\xff"}',
])
def test_a_body_python_reads_but_the_appliance_cannot_use_is_a_clear_400(
        rig: Rig, path: str, body: bytes) -> None:
    answer = rig.alpha.post(path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_json"
