"""Shared adapter vocabulary: transport errors, Retry-After, the registry, settings checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from appliance.config import ConfigError, ProviderSettings
from appliance.provider_kinds import ADAPTERS, build_adapter
from appliance.providers import Outcome, SubmitResult
from appliance.providers.base import parse_retry_after, report
from appliance.providers.http_transport import classify_transport_error
from appliance.states import REPORTED_FINAL_STATES, REPORTED_INTERMEDIATE_STATES
from tests.providers.provider_test_support import NOW_MS

REQ = httpx.Request("POST", "https://provider.example/send")


@pytest.mark.parametrize(
    ("exc", "result"),
    [
        (httpx.ConnectError("refused", request=REQ), SubmitResult.RETRY),
        (httpx.ConnectTimeout("slow dns", request=REQ), SubmitResult.RETRY),
        (httpx.PoolTimeout("pool", request=REQ), SubmitResult.RETRY),
        (httpx.ProxyError("proxy down", request=REQ), SubmitResult.RETRY),
        (httpx.UnsupportedProtocol("ftp://", request=REQ), SubmitResult.RETRY),
        (httpx.WriteTimeout("half sent", request=REQ), SubmitResult.UNCERTAIN),
        (httpx.ReadTimeout("no answer", request=REQ), SubmitResult.UNCERTAIN),
        (httpx.RemoteProtocolError("server hung up", request=REQ), SubmitResult.UNCERTAIN),
        (httpx.ReadError("reset", request=REQ), SubmitResult.UNCERTAIN),
        (httpx.WriteError("broken pipe", request=REQ), SubmitResult.UNCERTAIN),
        (RuntimeError("who knows"), SubmitResult.UNCERTAIN),
    ],
)
def test_classify_transport_error(exc: Exception, result: SubmitResult) -> None:
    out = classify_transport_error(exc)
    assert isinstance(out, Outcome)
    assert out.result is result
    assert out.error and type(exc).__name__ in out.error


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 3 ", 3.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),
        ("Tuesday, 14-Nov-23 22:14:20 GMT", 60.0),
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # already past
        ("-5", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW_MS) == seconds


def test_states_and_results() -> None:
    assert {"DELIVERED", "FAILED", "EXPIRED", "REJECTED"} == REPORTED_FINAL_STATES
    assert {"ACCEPTED", "ENROUTE"} == REPORTED_INTERMEDIATE_STATES
    assert [r.value for r in SubmitResult] == ["ACCEPTED", "RETRY", "REJECTED", "UNCERTAIN"]
    rep = report(
        ref="",
        provider_msg_id="X",
        status="DELIVRD",
        state="DELIVERED",
        reported_at_ms=1,
        error_code="",
    )
    assert (rep.ref, rep.final, rep.error_code) == (None, True, None)
    with pytest.raises(ValueError):
        report(ref="r", provider_msg_id=None, status="x", state="UNKNOWN", reported_at_ms=0)


FULL = ProviderSettings(
    name="p",
    kind="simulator",
    base_url="https://p.example",
    api_key="k",
    api_secret="s",
    signature_secret="ss",
    account_sid="AC1",
    auth_token="t",
    secret="sec",
    username="908501234567",
    password="pw",
    key="k",
    hash="h",
    usercode="8503001234",
)


def test_registry_builds_every_kind() -> None:
    assert set(ADAPTERS) == {"simulator", "http", "vonage", "twilio", "infobip", "verimor",
                             "iletimerkezi", "netgsm"}
    for kind, cls in ADAPTERS.items():
        built = build_adapter(replace(FULL, kind=kind))
        assert type(built) is cls
        assert (built.name, built.kind, built.settings.kind) == ("p", kind, kind)


def test_unknown_kind() -> None:
    with pytest.raises(ConfigError, match=r"\[providers.p\] kind"):
        build_adapter(replace(FULL, kind="carrier-pigeon"))


@pytest.mark.parametrize(
    ("kind", "options", "key"),
    [
        ("vonage", {"sign_request": True}, "sign_request"),
        ("vonage", {"sign_requests": "yes"}, "sign_requests"),
        ("vonage", {"max_skew_s": True}, "max_skew_s"),
        ("vonage", {"max_skew_s": -1}, "max_skew_s"),
        ("twilio", {"messaging_service_sid": 5}, "messaging_service_sid"),
        ("infobip", {"operator_delivery_final": 1}, "operator_delivery_final"),
        ("http", {"smpp_accepted_final": "true"}, "smpp_accepted_final"),
        ("http", {"anything": 1}, "anything"),
    ],
)
def test_bad_options_are_config_errors(kind: str, options: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"\[providers.p\] {key}"):
        build_adapter(FULL.with_keys(kind=kind, options=options))


def test_numeric_options_accept_integers() -> None:
    built = build_adapter(FULL.with_keys(kind="vonage", options={"max_skew_s": 60}))
    assert built.option_float("max_skew_s") == 60.0


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("vonage", "base_url"),
        ("vonage", "api_key"),
        ("vonage", "api_secret"),
        ("twilio", "account_sid"),
        ("twilio", "auth_token"),
        ("twilio", "sender"),
        ("infobip", "api_key"),
        ("infobip", "secret"),
        ("infobip", "base_url"),
        ("http", "base_url"),
    ],
)
def test_missing_required_settings(kind: str, missing: str) -> None:
    cleared: dict[str, Any] = {missing: ""}
    with pytest.raises(ConfigError, match=rf"\[providers.p\] {missing}: required"):
        build_adapter(FULL.with_keys(kind=kind, **cleared))


def test_signed_vonage_needs_a_signature_secret_not_an_api_secret() -> None:
    s = FULL.with_keys(kind="vonage", api_secret="", options={"sign_requests": True})
    build_adapter(s)
    with pytest.raises(ConfigError, match="signature_secret"):
        build_adapter(s.with_keys(signature_secret=""))


def test_twilio_messaging_service_replaces_the_sender() -> None:
    build_adapter(FULL.with_keys(kind="twilio", sender="",
                                 options={"messaging_service_sid": "MG1"}))


def test_dedupes_on_ref_comes_from_settings() -> None:
    assert build_adapter(replace(FULL, kind="http")).dedupes_on_ref is False
    assert build_adapter(replace(FULL, kind="http", dedupes_on_ref=True)).dedupes_on_ref is True


# The kinds whose provider refuses a request with one documented word (a 4xx without
# one is not a refusal of the message: ``docs/providers.md``, per kind).
REFUSES_ONLY_IN_ITS_WORDS = {"verimor", "netgsm"}


@pytest.mark.parametrize(
    ("code", "result"),
    [
        (301, SubmitResult.RETRY),
        (307, SubmitResult.RETRY),
        (308, SubmitResult.RETRY),
        (302, SubmitResult.UNCERTAIN),
        (303, SubmitResult.UNCERTAIN),
        (408, SubmitResult.RETRY),
        (425, SubmitResult.RETRY),
        (429, SubmitResult.RETRY),
        (400, SubmitResult.REJECTED),
        (404, SubmitResult.REJECTED),
        (500, SubmitResult.RETRY),
        (502, SubmitResult.RETRY),
        (503, SubmitResult.RETRY),
        (504, SubmitResult.UNCERTAIN),
        (599, SubmitResult.RETRY),
    ],
)
def test_http_status_classes_for_every_kind(code: int, result: SubmitResult) -> None:
    for kind in ADAPTERS:
        adapter = build_adapter(replace(FULL, kind=kind))
        response = httpx.Response(code, headers={"location": "https://p.example/new"})
        out = adapter.interpret_response(response)
        if kind in REFUSES_ONLY_IN_ITS_WORDS and result is SubmitResult.REJECTED:
            # A refusal without a word of the provider's guide is not a made-up final
            # state (DLR-8): nothing was sent, it goes again.
            assert out.result is SubmitResult.RETRY, (kind, code)
        else:
            assert out.result is result, (kind, code)
        assert out.error and str(code) in out.error


def test_an_outcome_of_parts_says_what_the_money_did() -> None:
    from appliance.providers import PartOutcome

    taken = Outcome.of_parts((PartOutcome(2, SubmitResult.RETRY, retry_after_s=3.0),
                              PartOutcome(1, SubmitResult.ACCEPTED, "A1")))
    assert (taken.result, taken.provider_msg_id, taken.retry_after_s) == (
        SubmitResult.ACCEPTED, "A1", 3.0)
    assert [p.part for p in taken.parts] == [1, 2]
    maybe = Outcome.of_parts((PartOutcome(1, SubmitResult.UNCERTAIN, error="no answer"),
                              PartOutcome(2, SubmitResult.RETRY)))
    assert (maybe.result, maybe.error) == (SubmitResult.UNCERTAIN, "part 1: no answer")
    assert Outcome.of_parts((PartOutcome(1, SubmitResult.REJECTED),)).result is \
        SubmitResult.REJECTED
    with pytest.raises(ValueError):
        Outcome.of_parts(())


def test_an_http_transport_never_sends_part_of_a_message() -> None:
    import asyncio

    from appliance.providers import OutgoingMessage
    from appliance.providers.http_transport import HttpTransport

    adapter = build_adapter(replace(FULL, kind="vonage", base_url="http://127.0.0.1:9"))
    transport = HttpTransport(adapter, adapter.settings, 1.0)
    msg = OutgoingMessage("R1", "+905321234567", "x" * 400, "http://cb", frozenset({1}))
    out = asyncio.run(transport.submit(msg))
    assert out.result is SubmitResult.REJECTED and "only the others" in (out.error or "")
    assert transport._session is None  # no connection was even opened
