"""Settings: precedence and one clear line per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import ConfigError, load_settings, masked


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
