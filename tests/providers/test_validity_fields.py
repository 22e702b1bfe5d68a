"""Validity (ROUTE-4) in each kind's own field, with the name and unit its provider
documents (:mod:`appliance.providers.validity_fields`): none without a validity; a
request of many messages carries the shortest; the ranges the kinds declare; a Twilio
report of error 30036 ends the message ``EXPIRED``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from appliance.config import ConfigError, ProviderSettings
from appliance.provider_kinds import KINDS, check_providers, load_settings
from appliance.providers.simulator_kind import SimulatorBatchAdapter
from appliance.providers.twilio import state_of
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp import pdu
from appliance.smpp.submission import relative_validity
from appliance.smpp.transport import SmppTransport
from tests.providers.provider_test_support import message
from tests.providers.test_provider_infobip import adapter as infobip
from tests.providers.test_provider_simulator import adapter as simulator
from tests.providers.test_provider_twilio import adapter as twilio
from tests.providers.test_provider_vonage import adapter as vonage
from tests.providers.test_verimor_batch import campaign as verimor_batch
from tests.providers.test_verimor_wire import adapter as verimor
from tests.smpp.support import run, settings_for

ONE_HOUR = replace(message(), validity_s=3_600)


def form(content: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(content.decode()).items()}


def test_each_kind_declares_the_range_its_field_carries() -> None:
    ranges = {name: kind.validity_range_s for name, kind in KINDS.items()}
    assert ranges == {
        "vonage": (20, 604_800), "simulator": (20, 604_800),  # ttl 20000..604800000 ms
        "twilio": (1, 36_000),  # ValidityPeriod, seconds
        "infobip": (60, 172_800), "verimor": (60, 172_800),  # minutes, at most 48 h
        "smpp": (1, 2_592_000),  # relative validity_period, in days at most 30
        "http": None, "iletimerkezi": None, "netgsm": None,  # kept by the sender only
    }


def test_vonage_and_the_simulator_send_ttl_in_milliseconds() -> None:
    for wire in (vonage(), simulator()):
        assert form(wire.build_request(ONE_HOUR).content)["ttl"] == "3600000"
        assert "ttl" not in form(wire.build_request(message()).content)
    # Signed requests sign it too: it is a parameter like the others.
    signed = vonage(sign_requests=True, signature_secret="s3cret")
    assert "ttl" in form(signed.build_request(ONE_HOUR).content)


def test_the_simulator_batch_carries_the_shortest_ttl() -> None:
    wire = SimulatorBatchAdapter(ProviderSettings(name="sim", kind="simulator"))
    msgs = [replace(message(ref=f"R{i}", msisdn=f"+90532123456{i}"), validity_s=v)
            for i, v in enumerate((900, 300, 600))]
    assert json.loads(wire.build_batch_request(msgs).content)["ttl"] == "300000"


def test_twilio_sends_validity_period_in_seconds() -> None:
    assert form(twilio().build_request(ONE_HOUR).content)["ValidityPeriod"] == "3600"
    assert "ValidityPeriod" not in form(twilio().build_request(message()).content)


def test_twilio_error_30036_is_expired() -> None:
    assert state_of("undelivered", "30036") == "EXPIRED"
    assert state_of("failed", 30036) == "EXPIRED"
    assert state_of("failed", "30003") == "FAILED"
    assert state_of("delivered", None) == "DELIVERED"


def test_infobip_sends_validity_period_in_whole_minutes() -> None:
    [one] = infobip().request_body(ONE_HOUR)["messages"]
    assert one["validityPeriod"] == 60
    [up] = infobip().request_body(replace(message(), validity_s=61))["messages"]
    assert up["validityPeriod"] == 2  # rounded up: never shorter than ours
    assert "validityPeriod" not in infobip().request_body(message())["messages"][0]


def test_verimor_sends_valid_for_as_hours_and_minutes_the_shortest_for_a_batch() -> None:
    wire = verimor()
    assert wire.send_body([replace(message(), validity_s=48 * 3_600)])["valid_for"] == "48:00"
    assert wire.send_body([replace(message(), validity_s=61)])["valid_for"] == "00:02"
    msgs = [replace(m, validity_s=v) for m, v in zip(verimor_batch(3), (7_200, 5_400, 9_000),
                                                     strict=True)]
    assert wire.send_body(msgs)["valid_for"] == "01:30"
    assert "valid_for" not in wire.send_body(verimor_batch(2))


def test_smpp_validity_period_is_the_relative_time_format() -> None:
    assert relative_validity(3_600) == "000000010000000R"
    assert relative_validity(93_784) == "000001020304000R"  # 1 d 2 h 3 min 4 s
    assert relative_validity(30 * 86_400) == "000030000000000R"
    frame = pdu.submit_sm(1, source_addr="APP", source_ton=5, source_npi=0,
                          destination_addr="905321234567", dest_ton=1, dest_npi=1,
                          esm_class=0, registered_delivery=1, data_coding=0,
                          short_message=b"hi", validity_period=relative_validity(600))
    assert pdu.read_short_message(frame).validity_period == "000000001000000R"


def test_the_smsc_receives_each_segment_with_its_validity_period() -> None:
    long = "Kod 1234. " * 30  # two segments

    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=3, delay_min_ms=0, delay_max_ms=5))
        transport = SmppTransport(settings_for(await sim.start()))
        await transport.start()
        try:
            assert await transport.session.wait_bound(5)
            await transport.submit(replace(message(ref="V1", body=long), validity_s=90))
            await transport.submit(message(ref="V2", body="no validity"))
        finally:
            await transport.close()
            await sim.stop()
        # 90 s: 1 minute 30 seconds, on each of V1's two segments; none on V2.
        assert sorted(sim.stats.validity.values()) == ["", "000000000130000R",
                                                       "000000000130000R"]

    run(body())


def test_a_default_validity_a_provider_cannot_carry_is_refused_at_start(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[sending]\nvalidity_s = 10\n\n[providers.v]\nkind = "vonage"\n'
                   'base_url = "https://rest.nexmo.com"\napi_key = "k"\napi_secret = "s"\n'
                   '\n[providers.h]\nkind = "http"\nbase_url = "https://gw.example"\n')
    with pytest.raises(ConfigError) as info:
        check_providers(load_settings(cfg, env={}))
    assert "validity_s: 10 is outside provider v's range (vonage: 20 to 604800" in str(
        info.value)
    assert "provider h" not in str(info.value)  # no field: kept by the sender, any value
    cfg.write_text(cfg.read_text().replace("validity_s = 10", "validity_s = 30"))
    check_providers(load_settings(cfg, env={}))
