"""Commercial messages with ``[compliance] country = "TR"`` (IYS-1..3), through a real
server and the simulator: ``type`` required; a commercial text without the refusal
instruction or the sender's identity refused before anything is queued; a commercial
single send to a number without ONAY refused; a commercial campaign over ONAY, RET,
TACIR, unknown and suppressed numbers reaches exactly the allowed ones, and the dry run,
the answer and the campaign's counts add up; it defaults to the daytime window."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, provider_config
from tests.sending.support_campaigns import import_list, show
from tests.web.console_support import create_user, page_token, sign_in

OK_TEXT = "Kampanya! Ret icin RET yazip 4609'a gonderin. ACME AS Mersis 0123456789"
ALL_DAY = {"from": "00:00", "to": "23:59", "tz": "UTC"}


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("commercial")
    data = tmp / "data"
    data.mkdir()
    sim = SimulatorProcess(tmp).start()
    cfg = provider_config(tmp / "cfg.toml", sim.url,
                          extra='\n[compliance]\ncountry = "TR"\niys_brand_code = "654321"\n')
    server = Server(data, config=cfg).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api)
    finally:
        server.stop()
        sim.stop()


def test_type_is_required_and_a_commercial_text_must_say_how_to_refuse_and_who_sends(
        rig: Rig) -> None:
    untyped = rig.api.post("/api/messages", json={"to": "+905320000001", "body": "hi"})
    assert untyped.status_code == 422 and untyped.json()["error"] == "type_required"
    bare = rig.api.post("/api/messages", json={"to": "+905320000001", "body": "Indirim!",
                                               "type": "commercial"})
    assert bare.status_code == 422, bare.text
    assert bare.json()["error"] == "commercial_content"
    assert bare.json()["missing"] == ["optout", "identity"]
    half = rig.api.post("/api/campaigns", json={"list": "x", "type": "commercial",
                                                "body": "Indirim! RET yazin"})
    assert half.json()["missing"] == ["identity"]
    ok = rig.api.post("/api/messages", json={"to": "+905320000001", "body": "Kodunuz 1234",
                                             "type": "transactional"})
    assert ok.status_code == 202, ok.text


def test_a_commercial_single_send_needs_consent(rig: Rig) -> None:
    refused = rig.api.post("/api/messages", json={"to": "+905320000002", "body": OK_TEXT,
                                                  "type": "commercial"})
    assert refused.status_code == 409 and refused.json()["error"] == "no_consent"
    assert rig.api.get("/api/messages", params={"msisdn": "+905320000002"}).json()[
        "messages"] == []
    assert rig.api.post("/api/consents", json={"msisdn": "+905320000002", "status": "ONAY",
                                               "recipient_type": "BIREYSEL"}).status_code == 201
    sent = rig.api.post("/api/messages", json={"to": "+905320000002", "body": OK_TEXT,
                                               "type": "commercial"})
    assert sent.status_code == 202, sent.text
    ref = sent.json()["ref"]
    wait_for(lambda: rig.sim.ref(ref)["received"] >= 1, 30, message="the send")
    shown = rig.api.get("/api/consents", params={"msisdn": "+905320000002"}).json()
    assert shown["consents"][0]["last_commercial_at"] is not None


def test_a_commercial_campaign_reaches_exactly_the_numbers_with_consent(rig: Rig) -> None:
    numbers = import_list(rig.api, "mixed", 50, prefix="+90533")
    onay, ret, tacir, suppressed = numbers[:20], numbers[20:30], numbers[30:35], numbers[35:40]
    records = ([{"msisdn": n, "status": "ONAY", "recipient_type": "BIREYSEL"} for n in onay]
               + [{"msisdn": n, "status": "RET", "recipient_type": "BIREYSEL"} for n in ret]
               + [{"msisdn": n, "status": "ONAY", "recipient_type": "TACIR"} for n in tacir]
               + [{"msisdn": n, "status": "ONAY", "recipient_type": "BIREYSEL"}
                  for n in suppressed])
    assert rig.api.post("/api/consents", json=records).json()["added"] == 40
    for n in suppressed:
        rig.api.post("/api/suppressions", json={"msisdn": n})
    # numbers[40:] have no record: BIREYSEL without consent.
    body = {"list": "mixed", "body": OK_TEXT, "type": "commercial", "window": ALL_DAY}
    plan = rig.api.post("/api/campaigns", json={**body, "dry_run": True}).json()
    assert (plan["messages"], plan["suppressed"], plan["no_consent"]) == (25, 5, 20)
    started = rig.api.post("/api/campaigns", json=body)
    assert started.status_code == 202, started.text
    cid = started.json()["campaignId"]
    assert started.json()["no_consent"] == 20
    done = wait_for(lambda: (c := show(rig.api, cid))["state"] == "DONE" and c, 60,
                    message="the campaign")
    assert (done["suppressed"], done["no_consent"], done["type"]) == (5, 20, "commercial")
    assert done["counts"]["CANCELLED"] == 25 and done["created"] == 50
    reached = {r for r in rig.sim.stats()["refs"]}
    mine = rig.api.get("/api/messages", params={"msisdn": onay[0]}).json()["messages"]
    assert mine and mine[0]["ref"] in reached
    for n in ret + numbers[40:]:
        got = rig.api.get("/api/messages", params={"msisdn": n}).json()["messages"]
        assert [m["state"] for m in got] == ["CANCELLED"] and got[0]["ref"] not in reached


def test_a_commercial_campaign_without_a_window_gets_the_daytime_one(rig: Rig) -> None:
    import_list(rig.api, "day", 1, prefix="+90534")
    got = rig.api.post("/api/campaigns", json={"list": "day", "body": OK_TEXT,
                                               "type": "commercial", "send_at":
                                               "2099-01-01T00:00:00Z"})
    assert got.status_code == 202, got.text
    assert got.json()["window"] == {"from": "08:00", "to": "21:00", "tz": "Europe/Istanbul"}


def _console_keys(client: httpx.Client) -> list[str]:
    page = client.get("/send")
    assert page.status_code == 200
    assert 'name="type" value="commercial"' in page.text  # the form asks (IYS-1)
    return re.findall(r'name="send_key" value="([^"]+)"', page.text)


def test_the_console_asks_the_type_and_its_confirmation_counts_those_without_consent(
        rig: Rig) -> None:
    numbers = import_list(rig.api, "console-mixed", 6, prefix="+90535")
    assert rig.api.post("/api/consents", json=[
        {"msisdn": n, "status": "ONAY", "recipient_type": "BIREYSEL"} for n in numbers[:2]
    ]).json()["added"] == 2
    create_user(rig.server.data_dir, "iys-clerk", "acme")
    with sign_in(rig.server, "iys-clerk") as client:
        token = page_token(client, "/send")
        one, campaign_key = _console_keys(client)
        # Untyped, or commercial without the refusal instruction: refused on the form.
        untyped = client.post("/send/message", data={"csrf_token": token, "send_key": one,
                                                      "to": numbers[3], "body": "Kod 1234"})
        assert untyped.status_code == 422 and "commercial" in untyped.text
        bare = client.post("/send/message", data={
            "csrf_token": token, "send_key": one, "to": numbers[3], "body": "Indirim!",
            "type": "commercial"})
        assert bare.status_code == 422 and "how to refuse" in bare.text
        # Commercial to a number without consent: refused, as through the API.
        refused = client.post("/send/message", data={
            "csrf_token": token, "send_key": one, "to": numbers[3], "body": OK_TEXT,
            "type": "commercial"})
        assert refused.status_code == 409, refused.text
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": campaign_key, "list": "console-mixed",
            "body": OK_TEXT, "type": "commercial"})
        assert review.status_code == 200, review.text
        assert 'data-no-consent="4"' in review.text
        assert "08:00" in review.text and "Europe/Istanbul" in review.text  # daytime
        confirm = dict(re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"',
                                  review.text))
        confirm["body"] = OK_TEXT  # the browser decodes the escaped attribute
        assert confirm["type"] == "commercial"
        sent = client.post("/send/campaign", data=confirm)
        assert sent.status_code == 303, sent.text
    cid = int(sent.headers["location"].rsplit("/", 1)[1])
    shown = wait_for(lambda: (c := show(rig.api, cid))["created"] == 6 and c, 60,
                     message="the console's campaign expanded")
    assert (shown["type"], shown["no_consent"]) == ("commercial", 4)
    assert rig.api.get("/api/messages", params={"msisdn": numbers[3]}).json()[
        "messages"][0]["state"] == "CANCELLED"
