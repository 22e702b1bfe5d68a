"""A provider kind is declared once: every other part reads the declarations.

The settings, ``config check``'s masking, the log redaction, the registry, the inbound
routes and the sessions' views all follow :data:`appliance.provider_kinds.KINDS`;
no other module of the appliance names a kind.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from appliance.config import ConfigError, ProviderSettings, Settings
from appliance.config.options import Option
from appliance.provider_kinds import (
    ADAPTERS,
    KINDS,
    build_provider,
    check_providers,
    masked,
    secret_values,
)
from appliance.providers.kind import Shape
from appliance.providers.status_query import StatusQuery
from appliance.providers.transport import SessionTransport

ROOT = Path(__file__).resolve().parents[2] / "appliance"
# Where a kind's name may be written: its own module, the registry, and the modules
# that write configs or name commands (the demo, the CLI).
ALLOWED = {"provider_kinds.py", "demo.py", "cli.py", "providers/simulator_kind.py",
           "providers/http_json.py", "providers/vonage.py", "providers/twilio.py",
           "providers/infobip.py", "providers/verimor.py", "smpp/kind.py",
           "providers/iletimerkezi.py", "providers/netgsm.py"}
# The kinds whose API takes many numbers a request and can be asked about a message.
AGGREGATORS = {"verimor", "iletimerkezi", "netgsm"}
# The kinds that can be asked about a message one at a time.
ASKED_ONE_BY_ONE = {"twilio", "infobip", "smpp"}  # smpp: query_sm, one a PDU
# Request kinds whose provider documents no inbound (MO) webhook.
NO_INBOUND = {"iletimerkezi", "netgsm"}
# Request kinds whose inbound messages are asked for (Netgsm's).
INBOUND_ASKED = {"netgsm"}
# Aggregators whose documentation publishes no request rate for sends.
NO_PUBLISHED_RATE = {"netgsm"}


def test_every_kind_is_declared_once_with_its_shape() -> None:
    assert list(KINDS) == ["simulator", "http", "vonage", "twilio", "infobip", "verimor",
                           "iletimerkezi", "netgsm", "smpp"]
    assert set(ADAPTERS) == {k for k, d in KINDS.items() if d.shape is Shape.REQUEST}
    for kind in KINDS.values():
        assert (kind.adapter is None) == (kind.shape is Shape.SESSION), kind.name
        assert (kind.inbound is None) == (kind.shape is Shape.SESSION
                                          or kind.name in NO_INBOUND), kind.name
        assert kind.inbound_query == (kind.name in INBOUND_ASKED), kind.name
        assert len({o.name for o in kind.options}) == len(kind.options), kind.name
        if kind.name in AGGREGATORS:
            assert kind.many_per_request and kind.status_query, kind.name
            assert (kind.requests_per_s > 0) != (kind.name in NO_PUBLISHED_RATE), kind.name
        else:
            assert not kind.many_per_request, kind.name
            assert kind.status_query == (kind.name in ASKED_ONE_BY_ONE
                                         or kind.name == "simulator"), kind.name
        # A kind says it can be asked exactly when its adapter has the status query, or
        # (a session kind) its session asks: SMPP's query_sm.
        asks = ((kind.adapter is not None and issubclass(kind.adapter, StatusQuery))
                or kind.name == "smpp")
        assert kind.status_query == asks, kind.name
    assert [k for k, d in KINDS.items() if d.national_language] == [
        "simulator", "verimor", "netgsm", "smpp"]


def test_no_module_outside_a_kind_s_own_names_it() -> None:
    """A kind's name in quotes (a comparison, a dict key, a default) outside its own
    module and the registry is a kind-specific branch that the declarations should
    carry instead. The SMPP package is that kind's protocol."""
    # "http" is also a URL scheme and an ASGI scope type: only a comparison with a kind
    # counts for it.
    names = "|".join(re.escape(k) for k in KINDS if k != "http")
    pattern = re.compile(r"""(?<![\w.])["'](""" + names + r""")["']"""
                         r"""|kind\W{0,6}["']http["']""")
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED or rel.startswith(("smpp/", "simulator/")):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []


def test_every_secret_option_is_masked_and_redacted_whatever_its_name() -> None:
    """Masking and redaction know secrets from the declarations alone: each option a
    kind declares secret, in a table of that kind, is ``***`` in ``config check`` and
    among the values the logs redact."""
    for kind in KINDS.values():
        secrets = [o for o in kind.options if o.secret]
        values = {o.name: f"value-of-{o.name}-{kind.name}" for o in secrets}
        provider = ProviderSettings(name="p", kind=kind.name, options=values)
        settings = Settings(providers={"p": provider})
        shown = masked(settings)["providers"]["p"]
        for option in secrets:
            assert shown[option.name] == "***", (kind.name, option.name)
        assert set(values.values()) <= set(secret_values(settings)), kind.name
        assert not any(v in repr(shown) for v in values.values())
    assert {"api_key", "api_secret", "signature_secret", "auth_token", "secret",
            "password"} <= {o.name for k in KINDS.values() for o in k.options if o.secret}


def test_a_secret_option_of_another_http_kind_stays_secret_in_a_copied_table() -> None:
    provider = ProviderSettings(name="tw", kind="twilio", base_url="https://t.example",
                                account_sid="AC1", auth_token="t0ken", api_secret="copied-s")
    settings = Settings(providers={"tw": provider})
    assert masked(settings)["providers"]["tw"]["api_secret"] == "***"
    assert "copied-s" in secret_values(settings)
    check_providers(settings)  # tolerated: a table copied between HTTP kinds still works


def test_a_session_kind_refuses_a_key_that_is_not_its_own() -> None:
    table = {"host": "h", "port": 1, "system_id": "s", "password": "p", "source_addr": "A"}
    provider = ProviderSettings(name="smsc", kind="smpp", api_key="k", options=table)
    with pytest.raises(ConfigError, match="api_key: unknown setting"):
        check_providers(Settings(providers={"smsc": provider}))


def test_declared_options_are_typed_strictly() -> None:
    for raw in (float("nan"), float("inf"), "30", -1.0):
        provider = ProviderSettings(name="v", kind="vonage", base_url="https://v.example",
                                    api_key="k", api_secret="s", max_skew_s=raw)
        with pytest.raises(ConfigError, match="max_skew_s"):
            check_providers(Settings(providers={"v": provider}))
    provider = ProviderSettings(name="v", kind="vonage", base_url="https://v.example",
                                api_key="k", api_secret="s", signature_method="crc32")
    with pytest.raises(ConfigError, match="signature_method: 'crc32' is not one of"):
        check_providers(Settings(providers={"v": provider}))


def test_inbound_readers_come_from_the_declarations() -> None:
    for name, kind in KINDS.items():
        if kind.shape is not Shape.REQUEST:
            continue
        full: dict[str, object] = {
            o.name: (o.default or "x") if isinstance(o.default, str) else o.default
            for o in kind.options
            if o.name not in ("basic_user", "signature_method", "messaging_service_sid")}
        provider = build_provider(
            ProviderSettings(name="p", kind=name, base_url="https://p.example", options=full),
            submit_timeout_s=1.0)
        assert (provider.inbound_query is not None) == kind.inbound_query, name
        if kind.name in NO_INBOUND:
            assert kind.inbound is None and provider.inbound is None
            continue
        assert kind.inbound is not None and provider.inbound is not None
        assert type(provider.inbound) is type(kind.inbound(provider.reports)), name  # type: ignore[arg-type]


def test_a_session_is_listed_whatever_its_protocol() -> None:
    from appliance.providers.registry import Providers

    table = {"host": "127.0.0.1", "port": 9, "system_id": "s", "password": "p",
             "source_addr": "ACME"}
    settings = Settings(providers={
        "smsc": ProviderSettings(name="smsc", kind="smpp", options=table),
        "gw": ProviderSettings(name="gw", kind="http", base_url="https://g.example",
                               secret="s")})
    providers = Providers(settings, KINDS)
    assert providers.sessions() == {}  # nothing built yet: nothing to show
    sessions = providers.sessions(build=True)
    assert list(sessions) == ["smsc"]
    provider, transport = sessions["smsc"]
    assert isinstance(transport, SessionTransport) and provider.kind == "smpp"
    assert transport.state().bound is False
    assert transport.configured_rate_per_s == provider.settings.rate_per_s


def test_an_option_declaration_reads_what_its_default_says() -> None:
    from appliance.config import read_option

    assert read_option("", Option("n", 1), 3) == 3
    assert read_option("", Option("f", 1.0), 3) == 3.0
    for option, raw in ((Option("n", 1), 1.5), (Option("b", False), "yes"),
                        (Option("s", ""), 5), (Option("c", "a", choices=("a",)), "b")):
        with pytest.raises(ConfigError):
            read_option("", option, raw)
    assert replace(Option("x", ""), secret=True).secret
