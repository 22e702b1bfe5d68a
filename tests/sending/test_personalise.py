"""OPS-3 templates and OPS-2 windows (pure functions), and personalisation through the API:
the dry run counts parts after substitution, an unknown placeholder is a 422."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from appliance.sending.personalise import TemplateError, parse
from appliance.sending.windows import BadWindow, SendWindow
from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import provider_config
from tests.sending.support_campaigns import import_list


@pytest.fixture
def api(tmp_path: Path) -> Iterator[httpx.Client]:
    """A server whose provider is not listening: messages wait in RETRY, unsent."""
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{free_port()}")
    server = Server(data, config=cfg).start()
    try:
        with server.client(create_account(data, "acme")) as client:
            yield client
    finally:
        server.stop()


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(("body", "name", "out"), [
    ("Merhaba {name|Müşterimiz}, indirim!", "Ayşe", "Merhaba Ayşe, indirim!"),
    ("Merhaba {name|Müşterimiz}, indirim!", None, "Merhaba Müşterimiz, indirim!"),
    ("Merhaba {name|Müşterimiz}, indirim!", "   ", "Merhaba Müşterimiz, indirim!"),
    ("Merhaba {name}, indirim!", None, "Merhaba , indirim!"),
    ("Merhaba { name }!", " Ali ", "Merhaba Ali!"),
    ("{{name}} is literal, {name|} is empty", None, "{name} is literal,  is empty"),
    ("a } alone and }} doubled", "x", "a } alone and } doubled"),
])
def test_templates_render_per_contact(body: str, name: str | None, out: str) -> None:
    assert parse(body).render(name) == out


@pytest.mark.parametrize(("body", "placeholder"), [
    ("Hi {isim}", "isim"), ("Hi {Name}", "Name"), ("Hi {}", ""), ("Hi {name", None),
    ("Hi {na{me}", None),
])
def test_unknown_or_broken_placeholders_are_refused(body: str, placeholder: str | None) -> None:
    with pytest.raises(TemplateError) as caught:
        parse(body)
    assert caught.value.placeholder == placeholder


def test_a_window_follows_the_local_clock_across_daylight_saving() -> None:
    berlin = SendWindow(2 * 60 + 30, 9 * 60, "Europe/Berlin")
    # 2027-03-28: clocks go from 02:00 to 03:00; 02:30 does not exist that day, so the
    # window opens at the jump (01:00Z, 03:00 local) and not an hour later.
    assert berlin.next_open_ms(ms("2027-03-27T22:00:00")) == ms("2027-03-28T01:00:00")
    # the day before, 02:30 local is 01:30Z (UTC+1); the day after, 00:30Z (UTC+2)
    assert berlin.next_open_ms(ms("2027-03-26T22:00:00")) == ms("2027-03-27T01:30:00")
    assert berlin.next_open_ms(ms("2027-03-28T22:00:00")) == ms("2027-03-29T00:30:00")
    # 2027-10-31: 02:00-03:00 happens twice; both are inside the window
    assert berlin.is_open(ms("2027-10-31T00:45:00")) and berlin.is_open(ms("2027-10-31T01:45:00"))


def test_a_window_can_span_midnight() -> None:
    night = SendWindow(22 * 60, 6 * 60, "Europe/Istanbul")  # UTC+3
    assert night.is_open(ms("2027-01-15T20:00:00"))  # 23:00 local
    assert night.is_open(ms("2027-01-16T02:59:00"))  # 05:59 local
    assert not night.is_open(ms("2027-01-16T03:00:00"))  # 06:00 local
    assert night.next_open_ms(ms("2027-01-16T03:00:00")) == ms("2027-01-16T19:00:00")


@pytest.mark.parametrize("value", [
    {"from": "09:00", "to": "20:00"}, {"from": "9:00", "to": "20:00", "tz": "UTC"},
    {"from": "09:00", "to": "25:00", "tz": "UTC"}, {"from": "09:00", "to": "20:00", "tz": "X/Y"},
    {"from": "09:00", "to": "20:00", "tz": "UTC", "days": "mon"}, "09-20",
])
def test_bad_windows_are_refused(value: object) -> None:
    with pytest.raises(BadWindow):
        SendWindow.parse(value)


NAMES: list[str | None] = ["Ali", None, "Ayşe", "Bartholomew Alexander Montgomery-Smythe III"]


def test_the_dry_run_counts_parts_after_personalisation(api: httpx.Client) -> None:
    numbers = import_list(api, "named", 4, "+90544", names=NAMES)
    body = "Merhaba {name|Musterimiz}, " + "x" * 110
    dry = api.post("/api/campaigns", json={"list": "named", "body": body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    d = dry.json()
    # Ali, Musterimiz: GSM-7, 1 part each; Ayşe: UCS-2 (ş), 2 parts; the long name:
    # GSM-7 past 160 characters, 2 parts.
    assert (d["messages"], d["parts"], d["personalised"]) == (4, 6, True)
    assert d["encoding"] == "UCS-2" and d["ucs2_because"] == "ş" and d["ucs2_messages"] == 1
    longest = d["longest"]
    assert longest["parts"] == 2 and longest["encoding"] == "GSM-7"
    assert "Montgomery" in longest["text"]
    created = api.post("/api/campaigns", json={"list": "named", "body": body})
    assert created.status_code == 202 and created.json()["parts"] == 6
    cid = created.json()["campaignId"]
    done = wait_for(lambda: (c := api.get(f"/api/campaigns/{cid}").json())["created"] == 4
                    and c, 30)
    assert done["parts"] == 6 and done["parts_per_message"] == 2
    sent = api.get("/api/messages", params={"msisdn": numbers[2]}).json()["messages"][0]
    assert sent["parts"] == 2 and sent["encoding"] == "UCS-2"
    got = api.get(f"/api/messages/{sent['ref']}").json()
    assert got["ucs2_because"] == "ş"


def test_an_unknown_placeholder_is_refused_with_its_name(api: httpx.Client) -> None:
    import_list(api, "named2", 2, "+90545")
    r = api.post("/api/campaigns", json={"list": "named2", "body": "Sayın {soyad}, ..."})
    assert r.status_code == 422
    assert r.json()["error"] == "invalid_template" and r.json()["placeholder"] == "soyad"
    assert api.get("/api/campaigns").json()["campaigns"] == []


def test_a_personalised_text_too_long_for_the_provider_is_refused(api: httpx.Client) -> None:
    import_list(api, "longname", 1, "+90546", names=["Ş" * 400])  # 701: 11 parts
    r = api.post("/api/campaigns", json={"list": "longname", "body": "{name} " + "ş" * 300})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "unsendable_body" and "personalisation" in r.json()["message"]
