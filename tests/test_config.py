"""Settings: precedence and one clear line per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import ConfigError
from appliance.provider_kinds import KINDS, load_settings, masked


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "appliance.toml"
    p.write_text(text)
    return p


def test_defaults_file_env_flags_in_that_order(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'port = 9000\nhost = "0.0.0.0"\n[import]\nmax_rows = 10\n')
    assert load_settings(env={}).port == 8080
    s = load_settings(cfg, env={})
    assert (s.port, s.host, s.imports.max_rows) == (9000, "0.0.0.0", 10)
    s = load_settings(cfg, env={"APPLIANCE_PORT": "9100", "APPLIANCE_IMPORT_MAX_ROWS": "20"})
    assert (s.port, s.imports.max_rows) == (9100, 20)
    s = load_settings(cfg, env={"APPLIANCE_PORT": "9100"}, overrides={"port": 9200, "host": None})
    assert (s.port, s.host) == (9200, "0.0.0.0")


@pytest.mark.parametrize(
    ("text", "env", "fragment"),
    [
        ("prot = 1\n", {}, "prot: unknown setting"),
        ("port = 'high'\n", {}, "port: expected int"),
        ("port = 70000\n", {}, "not a TCP port"),
        ("synchronous = 'OFF'\n", {}, "synchronous: 'OFF' is not one of FULL, NORMAL"),
        ("[import]\nmax_rows = -1\n", {}, "max_rows: must not be negative"),
        ("[import]\nmax_rowz = 1\n", {}, "[import] max_rowz: unknown setting"),
        ("[providers.x]\nbase_url = 'http://a'\n", {}, "[providers.x] kind: missing"),
        ("[providers.x]\nkind = 'carrier-pigeon'\n", {}, "kind: 'carrier-pigeon' is not one of"),
        ("[providers.x]\nkind = 'vonage'\nmax_parts = 0\n", {},
         "[providers.x] max_parts: must be between 1 and 255"),
        ("[providers.x]\nkind = 'vonage'\nmax_parts = 256\n", {}, "got 256"),
        ("port = [1\n", {}, "not valid TOML"),
        ("", {"APPLIANCE_NOPE": "1"}, "environment APPLIANCE_NOPE: unknown setting"),
        ("", {"APPLIANCE_PORT": "eighty"}, "port: expected int"),
    ],
)
def test_mistakes_are_one_clear_line(tmp_path: Path, text: str, env: dict[str, str],
                                     fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), env=env)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml", env={})


def test_secrets_are_masked(tmp_path: Path) -> None:
    cfg = write(tmp_path, "[providers.main]\nkind = 'vonage'\napi_key = 'k'\napi_secret = 's3'\n"
                          "signature_secret = 'sig'\nregion_hint = 'x'\n")
    shown = masked(load_settings(cfg, env={}))
    main = shown["providers"]["main"]
    assert main["api_secret"] == "***" and main["signature_secret"] == "***"
    assert main["api_key"] == "***"
    assert main["options"] == {"region_hint": "x"}
    assert "s3" not in repr(shown)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("port = '8090'\n", "port: expected int, got '8090'"),
        ("[storage]\nmin_free_bytes = 1e12\n", "[storage] min_free_bytes: expected int"),
        ("[sending]\nsubmit_timeout_s = nan\n", "submit_timeout_s: must be a finite number"),
        ("[sending]\nsubmit_timeout_s = inf\n", "submit_timeout_s: must be a finite number"),
        ("[sending]\nsubmit_timeout_s = 0\n", "submit_timeout_s: must be more than 0"),
        ("[sending]\nvalidity_s = -1\n", "[sending] validity_s: must not be negative"),
        ("[sending]\nvalidity_s = 1.5\n", "[sending] validity_s: expected int"),
        ("[alerts]\ncoverage_min_pct = 250\n",
         "[alerts] coverage_min_pct: must be between 0 and 100, got 250"),
        ("[providers.x]\nkind = 'http'\nrate_per_s = nan\n", "rate_per_s: must be a finite"),
        ("[providers.x]\nkind = 'http'\nbase_url = 'gopher://gw.example'\n",
         "[providers.x] base_url: 'gopher://gw.example' is not an http:// or https:// URL"),
        ("[providers.x]\nkind = 'vonage'\nsender = 12345\n",
         "[providers.x] sender: expected str"),
        ("[webhooks]\ntimeout_s = '10'\n", "[webhooks] timeout_s: expected float"),
        ("log_full_numbers = 1\n", "log_full_numbers: expected bool"),
        ("[imports]\nmax_rows = 10\n", "[imports]: unknown section; did you mean [import]?"),
        ("imports = 1\n", "imports: unknown setting; did you mean [import]?"),
        ("[import]\nmax_rowz = 1\n", "max_rowz: unknown setting; did you mean max_rows?"),
        ("[providers.x]\nkind = 'vonag'\n", f'is not one of {", ".join(KINDS)};'
         ' did you mean "vonage"?'),
    ],
)
def test_file_values_are_typed_strictly(tmp_path: Path, text: str, fragment: str) -> None:
    """A TOML value must have the setting's type, be finite and lie in its range."""
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), env={})
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_environment_values_are_parsed_but_never_non_finite(tmp_path: Path) -> None:
    s = load_settings(env={"APPLIANCE_PORT": "8090", "APPLIANCE_SENDING_SUBMIT_TIMEOUT_S": "2.5",
                           "APPLIANCE_LOG_FULL_NUMBERS": "yes",
                           "APPLIANCE_STORAGE_MIN_FREE_BYTES": "1024"})
    assert (s.port, s.sending.submit_timeout_s, s.log_full_numbers) == (8090, 2.5, True)
    assert s.storage.min_free_bytes == 1024
    for var, value in (("APPLIANCE_SENDING_SUBMIT_TIMEOUT_S", "nan"),
                       ("APPLIANCE_ALERTS_COVERAGE_MIN_PCT", "inf"),
                       ("APPLIANCE_ALERTS_COVERAGE_MIN_PCT", "101")):
        with pytest.raises(ConfigError, match=r"finite|between 0 and 100"):
            load_settings(env={var: value})


def test_config_check_names_sections_as_the_file_does(tmp_path: Path) -> None:
    shown = masked(load_settings(write(tmp_path, "[import]\nmax_rows = 10\n"), env={}))
    assert shown["import"]["max_rows"] == 10
    assert "imports" not in shown


def test_a_session_provider_refuses_non_finite_numbers(tmp_path: Path) -> None:
    from appliance.provider_kinds import check_providers

    cfg = write(tmp_path, "[providers.smsc]\nkind = 'smpp'\nhost = '127.0.0.1'\nport = 2775\n"
                          "system_id = 'a'\npassword = 'p'\nsource_addr = 'ACME'\n"
                          "response_timeout_s = nan\nenquire_link_s = inf\n")
    with pytest.raises(ConfigError) as info:
        check_providers(load_settings(cfg, env={}))
    assert "response_timeout_s: expected a number of at least 0.1, got nan" in str(info.value)
    assert "enquire_link_s: expected a number of at least 1, got inf" in str(info.value)
