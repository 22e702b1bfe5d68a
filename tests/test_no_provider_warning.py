"""``serve`` and ``config check`` say at once when no provider is configured, rather than
leaving the first send to find out (``422 no_provider``)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import Server, run_cli


def test_serve_and_config_check_warn_when_no_provider_is_configured(tmp_path: Path) -> None:
    data = tmp_path / "data"
    checked = run_cli("config", "check", "--data-dir", str(data))
    assert "no provider is configured" in checked.stderr and "422 no_provider" in checked.stderr
    with_one = tmp_path / "one.toml"
    with_one.write_text('[providers.sim]\nkind = "simulator"\nbase_url = "http://127.0.0.1:9"\n')
    quiet = run_cli("config", "check", "--config", str(with_one), "--data-dir", str(data))
    assert "no provider" not in quiet.stderr
    server = Server(data).start()
    try:
        assert "no provider is configured" in server.log()
    finally:
        server.stop()
