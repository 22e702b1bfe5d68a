"""Messages as the field sends them (MSG-1..4, MSG-6), through a real server and the
simulator in its own process speaking Vonage's wire format: one ``messages[]`` entry,
one id and one receipt per part."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.message_text.segments import segment
from appliance.providers.http_json import body_signature
from tests.harness import FileClock, Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config, send, wait_state
from tests.web.console_support import create_user, sign_in

HOUR = 3_600_000
TURKISH = ("Merhaba Ayşe, kampanyamız başladı! Bu hafta tüm ürünlerde yüzde yirmi indirim"
           " var, kaçırmayın lütfen")
THREE_PARTS = "Spring sale " * 35  # GSM-7, 420 characters: 3 parts of 153
OTHER_SECRET = "other-provider-secret"
MAX_PARTS = 4
FINAL = ("DELIVERED", "FAILED", "EXPIRED", "REJECTED")


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client
    clock: FileClock
    data: Path


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("parts")
    sim = SimulatorProcess(tmp, "--delivered-rate", "1", "--delay-min-ms", "10",
                           "--delay-max-ms", "150").start()
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", time.time_ns() // 1_000_000)
    extra = (f"max_parts = {MAX_PARTS}\n\n[providers.other]\nkind = \"http\"\n"
             f"base_url = \"http://127.0.0.1:9\"\nsecret = \"{OTHER_SECRET}\"\n")
    cfg = provider_config(tmp / "cfg.toml", sim.url, extra=extra)
    server = Server(data, config=cfg, env=clock.env).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api, clock, data)
    finally:
        server.stop()
        sim.stop()


def final(api: httpx.Client, ref: str) -> dict[str, Any]:
    return wait_state(api, ref, *FINAL)


def reports_settled(api: httpx.Client, ref: str, count: int) -> dict[str, Any]:
    """The message once ``count`` reports are applied or kept."""
    def done() -> dict[str, Any] | None:
        m = message(api, ref)
        settled = [h for h in m["history"] if h["outcome"] != "WAITING"]
        return m if len(settled) >= count and m["state"] in FINAL else None

    return wait_for(done, 30, message=f"{count} reports for {ref}")


def test_a_turkish_text_is_two_ucs2_parts_each_with_its_id_and_report(rig: Rig) -> None:
    assert len(TURKISH) == 100 and segment(TURKISH).count == 2
    r = rig.api.post("/api/messages", json={"to": "+905321230201", "body": TURKISH})
    assert r.status_code == 202
    body = r.json()
    assert (body["state"], body["encoding"], body["parts"]) == ("QUEUED", "UCS-2", 2)
    assert body["poll"] == f"/api/messages/{body['ref']}"
    shown = reports_settled(rig.api, body["ref"], 2)
    assert shown["state"] == "DELIVERED"
    assert (shown["encoding"], shown["parts"], shown["ucs2_because"]) == ("UCS-2", 2, "ş")
    ids = rig.sim.ref(body["ref"])["message_ids"]
    assert [(p["part"], p["provider_msg_id"], p["state"]) for p in shown["part_reports"]] == [
        (1, ids[0], "DELIVERED"), (2, ids[1], "DELIVERED")]
    assert all(p["reported_at"] for p in shown["part_reports"])
    assert sorted(h["part"] for h in shown["history"]) == [1, 2]
    plain = rig.api.post("/api/messages", json={"to": "+905321230202", "body": "hi"}).json()
    assert (plain["encoding"], plain["parts"], plain["ucs2_because"]) == ("GSM-7", 1, None)


def test_three_parts_one_failed_in_random_order_is_failed_and_fully_covered(
        rig: Rig) -> None:
    key = create_account(rig.data, "covered")
    numbers = [f"+9053212303{i:02d}" for i in range(4)]
    rng = random.Random(8)
    steps = []
    for _ in numbers:
        order = [1, 2, 3]
        rng.shuffle(order)
        steps.append({"fail_part": rng.randint(1, 3), "report_order": order})
    with rig.server.client(key) as api:
        job = api.post("/api/contacts/import", json={"list": "three", "text": "\n".join(numbers)})
        wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
        rig.sim.script(steps)
        c = api.post("/api/campaigns", json={"list": "three", "body": THREE_PARTS})
        assert c.status_code == 202
        assert (c.json()["parts"], c.json()["encoding"]) == (12, "GSM-7")
        poll = c.json()["poll"]
        done = wait_for(lambda: (d := api.get(poll).json())["state"] == "DONE"
                        and d["finalised"] == 4 and d, 60, message="campaign final")
        assert done["coverage_pct"] == 100.0 and done["counts"] == {"FAILED": 4}
        assert (done["parts"], done["suppressed"], done["uncertain"]) == (12, 0, 0)
        for number in numbers:
            [m] = api.get("/api/messages", params={"msisdn": number}).json()["messages"]
            shown = reports_settled(api, m["ref"], 3)
            assert shown["state"] == "FAILED" and shown["parts"] == 3
            parts = shown["part_reports"]
            assert len(parts) == 3 and len({p["provider_msg_id"] for p in parts}) == 3
            assert sorted(p["state"] for p in parts) == ["DELIVERED", "DELIVERED", "FAILED"]
            assert rig.sim.ref(m["ref"])["received"] == 1
        rig.clock.advance(7 * HOUR)  # past the settle time: the window now holds them
        stats = api.get("/api/stats").json()
        assert stats["window"]["total"] == 4 and stats["coverage_pct"] == 100.0
        assert stats["delivered_pct"] == 0.0


def test_delivered_and_failed_parts_end_failed_in_every_order_labelled(rig: Rig) -> None:
    cases = [(fail, order) for fail in (1, 2) for order in ([1, 2], [2, 1])]
    create_user(rig.data, "parts-user", account="acme")
    for i, (fail, order) in enumerate(cases):
        rig.sim.script([{"fail_part": fail, "report_order": order}])
        ref = send(rig.api, f"+9053212304{i:02d}", TURKISH)
        shown = reports_settled(rig.api, ref, 2)
        assert shown["state"] == "FAILED", (fail, order, shown)
        history = shown["history"]  # in the order the receipts reached us
        assert [h["part"] for h in history] == order
        assert {h["part"]: h["state"] for h in history}[fail] == "FAILED"
        assert all(h["outcome"] == "APPLIED" for h in history)
        with sign_in(rig.server, "parts-user") as console:
            page = console.get("/messages", params={"q": ref}).text
        assert "(part 1 of 2)" in page and "(part 2 of 2)" in page
        assert "UCS-2 (because of 'ş')" in page


def test_a_part_refused_inside_a_200_is_rejected_alone_and_never_resent(rig: Rig) -> None:
    # The receipts are held until the submission's outcome has been read: a part's
    # report ends the message and replaces the error the 200 left.
    rig.sim.script([{"refuse_part": 2, "part_status": "5", "push": False}])
    ref = send(rig.api, "+905321230501", THREE_PARTS)
    submitted = wait_state(rig.api, ref, "SUBMITTED")
    assert "partly accepted" in (submitted["error"] or "")
    assert rig.sim.push_now([ref])["pushed"] == 2
    shown = reports_settled(rig.api, ref, 2)
    assert shown["state"] == "REJECTED" and shown["final"]
    parts = {p["part"]: p for p in shown["part_reports"]}
    assert parts[2]["state"] == "REJECTED" and parts[2]["provider_msg_id"] is None
    assert "status 5" in parts[2]["error"]
    assert [parts[p]["state"] for p in (1, 3)] == ["DELIVERED", "DELIVERED"]
    assert [parts[p]["provider_msg_id"] for p in (1, 3)] == rig.sim.ref(ref)["message_ids"]
    assert rig.sim.ref(ref)["received"] == 1 and shown["attempts"] == 1


def test_a_report_from_another_provider_does_not_touch_the_message(rig: Rig) -> None:
    ref = send(rig.api, "+905321230601", "hello")
    delivered = reports_settled(rig.api, ref, 1)
    assert delivered["state"] == "DELIVERED"
    body = json.dumps({"ref": ref, "id": rig.sim.ref(ref)["message_id"], "status": "failed",
                       "reported_at": "2099-01-01T00:00:00Z"}).encode()
    r = rig.api.post("/callbacks/other", content=body, headers={
        "Content-Type": "application/json", "X-Signature": body_signature(body, OTHER_SECRET)})
    assert r.status_code == 200
    after = message(rig.api, ref)
    assert (after["state"], after["finalised_at"]) == ("DELIVERED", delivered["finalised_at"])
    assert [h["status"] for h in after["history"]] == ["delivered"]
    assert [p["state"] for p in after["part_reports"]] == ["DELIVERED"]
    assert rig.api.get("/api/stats").json()["inbox"]["waiting"] >= 1


def test_a_campaign_dry_run_counts_parts_and_creates_nothing(rig: Rig) -> None:
    key = create_account(rig.data, "dry")
    numbers = [f"+9053212307{i:02d}" for i in range(5)]
    with rig.server.client(key) as api:
        job = api.post("/api/contacts/import", json={"list": "tr", "text": "\n".join(numbers)})
        wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
        r = api.post("/api/campaigns", json={"list": "tr", "body": TURKISH, "dry_run": True})
        assert r.status_code == 200, r.text
        got = r.json()
        assert {k: got[k] for k in ("messages", "parts", "encoding", "suppressed",
                                    "ucs2_because", "parts_per_message")} == {
            "messages": 5, "parts": 10, "encoding": "UCS-2", "suppressed": 0,
            "ucs2_because": "ş", "parts_per_message": 2}
        assert api.get("/api/campaigns").json()["campaigns"] == []
        assert all(api.get("/api/messages", params={"msisdn": n}).json()["messages"] == []
                   for n in numbers)
        assert api.post("/api/campaigns", json={"list": "nope", "body": "x",
                                                "dry_run": True}).status_code == 422
        assert api.post("/api/campaigns", json={"list": "tr", "body": "x",
                                                "dry_run": "yes"}).status_code == 422
        real = api.post("/api/campaigns", json={"list": "tr", "body": TURKISH})
        shown = api.get(real.json()["poll"]).json()
        assert (shown["parts"], shown["encoding"], shown["ucs2_because"]) == (10, "UCS-2", "ş")
        assert (shown["suppressed"], shown["cancelled"], shown["uncertain"]) == (0, 0, 0)


def test_a_body_that_cannot_be_sent_is_422_with_the_limit_and_nothing_is_queued(
        rig: Rig) -> None:
    key = create_account(rig.data, "refused")
    too_long = "x" * (153 * MAX_PARTS + 1)
    with rig.server.client(key) as api:
        lone = api.post("/api/messages", content=b'{"to": "+905321230801", "body": "ab\\ud800c"}',
                        headers={"Content-Type": "application/json"})
        assert lone.status_code == 422
        # Refused where the JSON is read, before any field is looked at.
        assert (lone.json()["error"], lone.json()["reason"]) == ("invalid_unicode",
                                                                  "lone_surrogate")
        assert "U+D800" in lone.json()["message"]
        many = api.post("/api/messages", json={"to": "+905321230801", "body": too_long})
        assert many.status_code == 422
        refused = many.json()
        assert (refused["error"], refused["reason"], refused["limit"], refused["parts"]) == (
            "unsendable_body", "too_many_parts", MAX_PARTS, MAX_PARTS + 1)
        assert "max_parts" in refused["message"]
        # The other provider keeps the default limit (10 parts): there the text is fine.
        elsewhere = api.post("/api/messages", json={"to": "+905321230803", "body": too_long,
                                                    "provider": "other"})
        assert elsewhere.status_code == 202 and elsewhere.json()["parts"] == MAX_PARTS + 1
        job = api.post("/api/contacts/import", json={"list": "l", "text": "+905321230802\n"})
        wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
        for dry in (False, True):
            c = api.post("/api/campaigns", json={"list": "l", "body": too_long,
                                                 "dry_run": dry})
            assert c.status_code == 422 and c.json()["reason"] == "too_many_parts"
        assert api.get("/api/messages", params={"msisdn": "+905321230801"}).json()[
            "messages"] == []
        assert api.get("/api/campaigns").json()["campaigns"] == []
