"""Routes as configured and chosen (ROUTE-3): ``[[routes]]`` read strictly, first match
wins, typed routes match only typed messages, lowered providers after the others but for
the trickle, and the refusals each kind declares as "this route cannot"."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from appliance.config import ConfigError, ProviderSettings
from appliance.message_text.segments import segment
from appliance.provider_kinds import KINDS, load_settings
from appliance.providers.http_json import HttpJsonAdapter
from appliance.providers.outcome import SubmitResult
from appliance.providers.vonage import VonageAdapter
from appliance.sending.failover import Router, Target
from appliance.sending.refs import RefMaker
from appliance.sending.routes import RouteTable, trickle_ticket
from tests.harness import run_cli

PROVIDERS = """
[providers.netgsm]
kind = "simulator"
[providers.verimor]
kind = "simulator"
[providers.vonage]
kind = "simulator"
"""


ROUTES = """
[[routes]]
prefix = "+90"
type = "commercial"
providers = ["netgsm", "verimor"]

[[routes]]
prefix = "+905"
providers = ["verimor", "netgsm"]

[[routes]]
prefix = ""
providers = ["vonage"]
"""


def test_first_match_wins_and_typed_routes_match_only_typed_messages(tmp_path: Path) -> None:
    table = RouteTable(load_settings(_write(tmp_path, ROUTES), env={}))
    assert table.choose("+905321234567", "commercial", None, (), 1).provider == "netgsm"
    assert table.choose("+905321234567", "transactional", None, (), 1).provider == "verimor"
    assert table.choose("+905321234567", None, None, (), 1).route == "+905"
    assert table.choose("+447700900000", "commercial", None, (), 1).route == ""
    pinned = table.choose("+905321234567", "commercial", "vonage", (), 1)
    assert (pinned.provider, pinned.route) == ("vonage", None)
    # The next provider of a route, never one already left.
    assert table.next_provider("+905321234567", "commercial", "netgsm", (), ()) == "verimor"
    assert table.next_provider("+905321234567", "commercial", "verimor", ("netgsm",),
                               ()) is None


def test_a_lowered_provider_is_tried_after_the_others_but_for_its_trickle(
        tmp_path: Path) -> None:
    table = RouteTable(load_settings(_write(tmp_path, ROUTES, "health_trickle = 10"), env={}))
    chosen = [table.choose("+905321234567", None, None, {"verimor"}, t).provider
              for t in range(1000)]
    assert chosen.count("verimor") == 100 and chosen.count("netgsm") == 900
    # Refs made together count up by one: a campaign chunk's share is 1 in 10 (give or
    # take the one where the ref's last 20 bits wrap).
    refs = RefMaker().new_refs(1000, 1_800_000_000_000)
    drawn = [table.choose("+905321234567", None, None, {"verimor"}, trickle_ticket(r))
             for r in refs]
    assert 99 <= [c.provider for c in drawn].count("verimor") <= 101
    assert trickle_ticket("0000000000000000000000000A") == 10
    # Every provider of the route lowered: the order as written.
    assert table.choose("+905321234567", None, None, {"verimor", "netgsm"}, 1).provider \
        == "verimor"


def _write(tmp_path: Path, routes: str, sending: str = "") -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(f"[sending]\n{sending}\n{PROVIDERS}\n{routes}")
    return path


@pytest.mark.parametrize(("routes", "fragment"), [
    ('[[routes]]\nprefix = "+90"\nproviders = ["netgsm", "netgsn"]',
     "[[routes]] #1 (prefix '+90') providers: no provider named 'netgsn' (configured:"
     " netgsm, verimor, vonage); did you mean netgsm?"),
    ('[[routes]]\nprefix = "90"\nproviders = ["netgsm"]', "prefix: must be an E.164 prefix"),
    ('[[routes]]\nprefix = "+90"\ntype = "otp"\nproviders = ["netgsm"]',
     "type: must be one of commercial, transactional"),
    ('[[routes]]\nprefix = "+90"\nproviders = []', "providers: must be a list"),
    ('[[routes]]\nprefix = "+90"\nproviders = ["netgsm", "netgsm"]', "named twice"),
    ('[[routes]]\nprefix = "+90"\nprovider = ["netgsm"]',
     "provider: unknown setting; did you mean providers?"),
    ('[providers.x]\nkind = "simulator"\nfailover_after = 0', "failover_after: must be at"),
])
def test_config_check_and_serve_refuse_a_bad_route_in_one_line(
        tmp_path: Path, routes: str, fragment: str) -> None:
    path = _write(tmp_path, routes)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    assert fragment in str(caught.value)
    if "no provider named" not in fragment:
        return
    for command in (("config", "check"), ("serve",)):
        out = run_cli(*command, "--config", str(path), "--data-dir", str(tmp_path / "d"),
                      check=False)
        assert out.returncode == 2 and fragment in out.stderr, out.stderr


def test_config_check_prints_the_routes_as_the_file_writes_them(tmp_path: Path) -> None:
    out = run_cli("config", "check", "--config", str(_write(tmp_path, ROUTES)),
                  "--data-dir", str(tmp_path / "d"))
    shown = json.loads(out.stdout)
    assert shown["routes"][0] == {"prefix": "+90", "type": "commercial",
                                  "providers": ["netgsm", "verimor"]}
    assert shown["routes"][2] == {"prefix": "", "providers": ["vonage"]}
    assert shown["providers"]["netgsm"]["failover_after"] == 3
    assert shown["sending"]["health_trickle"] == 100
    help_text = run_cli("config", "check", "--help").stdout
    assert "[[routes]]" in help_text


def test_the_http_kind_and_vonage_declare_their_route_refusals() -> None:
    assert KINDS["http"].route_refusals == {"no_route", "destination_not_served"}
    assert KINDS["vonage"].route_refusals == {"6", "22"} == KINDS["simulator"].route_refusals
    http = HttpJsonAdapter(ProviderSettings(name="h", kind="http", base_url="http://x"))
    refused = http.interpret_response(httpx.Response(404, json={"error": "no_route"}))
    assert refused.result is SubmitResult.REJECTED and refused.code == "no_route"
    other = http.interpret_response(httpx.Response(400, text="bad"))
    assert other.result is SubmitResult.REJECTED and other.code is None
    vonage = VonageAdapter(ProviderSettings(name="v", kind="vonage", base_url="http://x",
                                            api_key="k", api_secret="s"))
    six = vonage.interpret_response(httpx.Response(200, json={"messages": [
        {"status": "6", "error-text": "Invalid Message"}]}))
    assert six.result is SubmitResult.REJECTED and six.code == "6"


def test_a_message_moves_only_where_it_can_be_sent_as_it_was_counted(tmp_path: Path) -> None:
    """GSM-7 Turkish moves only to a provider that sends it in GSM-7 Turkish in the same
    parts (the count the user was shown and billed by); one without the Turkish tables
    for the number, or whose kind counts it in more parts, is passed over, and so is one
    whose max_parts it exceeds. With none left the message stays where it is."""
    config = tmp_path / "cfg.toml"
    config.write_text("""
[providers.tr]
kind = "simulator"
national_language = "turkish"
[providers.short]
kind = "simulator"
national_language = "turkish"
max_parts = 1
[providers.plain]
kind = "simulator"
[providers.abroad]
kind = "simulator"
national_language = "turkish"
national_language_prefixes = ["+357"]
[providers.ng]
kind = "netgsm"
base_url = "http://127.0.0.1:9"
usercode = "u"
password = "p"
national_language = "turkish"
[providers.tr2]
kind = "smpp"
host = "127.0.0.1"
system_id = "s"
password = "p"
national_language = "turkish"

[[routes]]
prefix = "+90"
providers = ["tr", "short", "plain", "abroad", "ng", "tr2"]
""")
    settings = load_settings(config, env={})
    router = Router(settings, frozenset)
    text = ("Şu an güçlü bir kampanya başlıyor, İstanbul'da ışıklı günler sizi bekliyor! " * 3
            + "Kaçırmayın, şimdi çağırın: ışığı, gücü, çiçeği taşıyın.")
    turkish = segment(text, True)
    assert turkish.encoding == "GSM-7 Turkish" and turkish.count == 2
    assert segment(text, False).count > turkish.count  # UCS-2 elsewhere: more parts
    # Netgsm's count (the single shift: each Turkish letter two septets) takes more.
    assert segment(text, settings.providers["ng"].counting_to("+905321234567")).count \
        > turkish.count
    # short: max_parts 1; plain: no Turkish tables; abroad: not for +90; ng: more
    # parts. The SMPP provider sends it as it was counted.
    assert router.target("+905321234567", None, text, turkish.encoding, turkish.count,
                         "tr", ()) == Target("tr2")
    # Nowhere that sends it as it was counted: it stays with its provider.
    assert router.target("+905321234567", None, text, turkish.encoding, turkish.count,
                         "tr", ("tr2",)) is None
    # Plain GSM-7 goes anywhere it fits, as it is.
    assert router.target("+905321234567", None, "hello", "GSM-7", 1, "tr", ()) == Target(
        "short")
    assert router.target("+905321234567", None, "hello", "GSM-7", 1, "tr2",
                         ("tr", "short", "plain", "abroad", "ng")) is None
