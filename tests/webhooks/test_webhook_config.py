"""``[webhooks]``: url and secret go together, the URL is an HTTP one, the secret never
shows (``config check``, the logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.config import ConfigError
from appliance.provider_kinds import load_settings
from tests.harness import run_cli


@pytest.mark.parametrize(("table", "says"), [
    ('url = "https://crm.example.org/hooks"', "[webhooks] secret: missing"),
    ('secret = "s"', "[webhooks] url: missing"),
    ('url = "ftp://crm.example.org/"\nsecret = "s"', "not an http:// or https:// URL"),
    ('url = "https://a/"\nsecret = "s"\nconcurrency = 0', "[webhooks] concurrency"),
    ('url = "https://a/"\nsecret = "s"\ntimeout_s = 0', "[webhooks] timeout_s"),
    ('url = "https://a/"\nsecret = "s"\nretries = 3', "[webhooks] retries: unknown setting"),
])
def test_mistakes_are_refused_in_one_line(tmp_path: Path, table: str, says: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[webhooks]\n{table}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(cfg, env={})
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_environment_configures_it_and_config_check_masks_the_secret(
        tmp_path: Path) -> None:
    env = {"APPLIANCE_WEBHOOKS_URL": "https://crm.example.org/hooks",
           "APPLIANCE_WEBHOOKS_SECRET": "very-secret-value", "APPLIANCE_WEBHOOKS_CONCURRENCY": "2"}
    settings = load_settings(None, env=env)
    assert settings.webhooks.configured and settings.webhooks.concurrency == 2
    shown = run_cli("config", "check", "--data-dir", str(tmp_path / "d"), env=env).stdout
    assert "very-secret-value" not in shown
    webhooks = json.loads(shown[shown.index("{"):])["webhooks"]
    assert webhooks["secret"] == "***" and webhooks["url"] == "https://crm.example.org/hooks"
