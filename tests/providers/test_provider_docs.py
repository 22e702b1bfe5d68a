"""docs/providers.md stays true to the adapters: kinds, options, status words, defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.provider_kinds import ADAPTERS
from appliance.providers import http_json, simulator_kind, twilio, vonage

DOC = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_every_kind_has_a_section_and_its_options(kind: str) -> None:
    assert f"## `{kind}`" in DOC
    for option in ADAPTERS[kind].OPTIONS:
        assert option in DOC, option


@pytest.mark.parametrize(
    "words",
    [vonage.DLR_STATES, twilio.STATUS_STATES, http_json.STATUS_STATES],
    ids=["vonage", "twilio", "http"],
)
def test_every_mapped_status_word_is_documented(words: dict[str, str]) -> None:
    lowered = DOC.lower()
    for word in words:
        assert f"`{word}`" in lowered, word


def test_vonage_submit_statuses_are_all_listed() -> None:
    for code in vonage.SUBMIT_STATUS_TEXT:
        assert f" {code}" in DOC, code


def test_simulator_defaults_are_the_documented_ones() -> None:
    for value in (
        simulator_kind.SIMULATOR_BASE_URL,
        simulator_kind.SIMULATOR_API_KEY,
        simulator_kind.SIMULATOR_API_SECRET,
        simulator_kind.SIMULATOR_SIGNATURE_SECRET,
    ):
        assert f'"{value}"' in DOC, value


def test_vonage_accepts_any_age_by_default_as_documented() -> None:
    assert vonage.VonageAdapter.OPTIONS["max_skew_s"] == 0.0
    assert "# max_skew_s = 0 " in DOC
    assert "A signed receipt of any age is accepted" in DOC
    assert "appliance_signed_report_age_seconds" in DOC


def test_twilio_port_forms_are_documented() -> None:
    assert twilio.url_variants("https://sms.example.com:8443/cb") == [
        "https://sms.example.com:8443/cb", "https://sms.example.com/cb"]
    assert "`https://sms.example.com:8443/...` also\n  matches a signature over" in DOC
    assert "(the form `a=1&a=1` signs as `a1`)" in DOC


def test_the_vonage_callback_limit_is_documented() -> None:
    assert vonage.VonageAdapter.CALLBACK_MAX_CHARS == 100
    assert "Vonage accepts at most 100 in `callback`" in DOC
    for kind, cls in ADAPTERS.items():
        limit = getattr(cls, "CALLBACK_MAX_CHARS", None)
        if limit is not None:
            assert f"`{kind}`, the callback URL at most {limit} characters" in DOC, kind
