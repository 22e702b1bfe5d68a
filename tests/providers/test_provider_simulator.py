"""The simulator kind: the Vonage format with local defaults and signing on."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

import pytest

from appliance.config import ConfigError, ProviderSettings
from appliance.providers import AuthError
from appliance.providers.simulator_kind import (
    SIMULATOR_API_KEY,
    SIMULATOR_API_SECRET,
    SIMULATOR_BASE_URL,
    SIMULATOR_SIGNATURE_SECRET,
    SimulatorAdapter,
)
from appliance.providers.vonage import VonageAdapter, vonage_signature
from tests.providers.provider_test_support import (
    NOW_MS,
    adapter_of,
    callback,
    changed,
    message,
)

CB = "http://127.0.0.1:8080/callbacks/sim"


def adapter(**changes: object) -> SimulatorAdapter:
    built = adapter_of(SimulatorAdapter, changed(ProviderSettings(name="sim", kind="simulator"),
                                                 **changes))
    assert isinstance(built, VonageAdapter)
    return built


def receipt(secret: str = SIMULATOR_SIGNATURE_SECRET, ts: int = NOW_MS // 1000) -> str:
    params = {
        "messageId": "SIM-1",
        "status": "delivered",
        "client-ref": "R1",
        "message-timestamp": "2023-11-14 22:13:20",
        "api-key": SIMULATOR_API_KEY,
        "timestamp": str(ts),
        "nonce": "n-1",
    }
    params["sig"] = vonage_signature(params, secret, "sha256")
    return f"{CB}?{urlencode(params)}"


def test_defaults_fill_empty_settings() -> None:
    a = adapter()
    assert a.kind == "simulator"
    assert a.settings.base_url == SIMULATOR_BASE_URL == "http://127.0.0.1:9090"
    assert a.settings.option("signature_secret") == SIMULATOR_SIGNATURE_SECRET
    req = a.build_request(message(callback_url=CB))
    assert str(req.url) == "http://127.0.0.1:9090/sms/json"
    fields = dict(parse_qsl(req.content.decode()))
    assert (fields["api_key"], fields["api_secret"]) == (SIMULATOR_API_KEY, SIMULATOR_API_SECRET)
    assert fields["client-ref"] == "01HF3Z9K2M8Q4R6T7V"


def test_receipts_are_signed_by_default() -> None:
    a = adapter()
    a.verify(callback(receipt(), method="GET"))
    [rep] = a.parse_reports(callback(receipt(), method="GET"))
    assert (rep.ref, rep.state, rep.final) == ("R1", "DELIVERED", True)
    with pytest.raises(AuthError):
        a.verify(callback(receipt(secret="guess"), method="GET"))
    unsigned = f"{CB}?messageId=SIM-1&status=delivered&api-key={SIMULATOR_API_KEY}"
    with pytest.raises(AuthError):
        a.verify(callback(unsigned, method="GET"))


def test_skew_check_is_off_by_default_and_can_be_turned_on() -> None:
    adapter().verify(callback(receipt(ts=NOW_MS // 1000 - 7200), method="GET"))
    strict = adapter(options={"max_skew_s": 60})
    with pytest.raises(AuthError):
        strict.verify(callback(receipt(ts=NOW_MS // 1000 - 7200), method="GET"))


def test_configured_values_win() -> None:
    a = adapter(
        base_url="http://10.0.0.5:9999",
        signature_secret="mine",
        signature_method="md5hash",
        api_key="k",
        api_secret="s",
    )
    assert str(a.build_request(message()).url) == "http://10.0.0.5:9999/sms/json"
    params = {"messageId": "SIM-1", "status": "failed", "timestamp": str(NOW_MS // 1000)}
    params["sig"] = vonage_signature(params, "mine", "md5hash")
    a.verify(callback(f"{CB}?{urlencode(params)}", method="GET"))


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"\[providers.sim\] sign_request"):
        adapter(options={"sign_request": True})
