"""``appliance proxy-config``: made from the settings in force, and taken by the proxy
it is for (``nginx -t``, ``caddy adapt``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from appliance.config import HttpSettings, ImportSettings, ReportSettings, Settings
from appliance.optout.consent_input import MAX_BYTES as CONSENT_MAX_BYTES
from appliance.optout.suppression_import import MAX_BYTES as SUPPRESSION_MAX_BYTES
from appliance.proxy.caddy import caddyfile
from appliance.proxy.nginx import nginx_config
from appliance.proxy.shape import ROOM, proxy_shape
from tests.harness import free_port, run_cli
from tests.proxy.support import NGINX, Nginx, make_certificate, needs_nginx, printed_config

CADDY = shutil.which("caddy")
SETTINGS = Settings(host="0.0.0.0", port=8123,
                    imports=ImportSettings(max_bytes=5_000_000),
                    reports=ReportSettings(intake_port=8124),
                    http=HttpSettings(header_timeout_s=1.5, body_timeout_s=20))


def test_the_shape_follows_the_settings() -> None:
    shape = proxy_shape(SETTINGS)
    assert (shape.upstream, shape.intake) == ("127.0.0.1:8123", "127.0.0.1:8124")
    # Every route's body fits: a consent file (16 MiB) and a suppression list (8 MiB) are
    # larger than this import limit, so the proxy must let the largest of them through.
    assert CONSENT_MAX_BYTES > SUPPRESSION_MAX_BYTES > 5_000_000
    assert shape.body_limit_bytes == CONSENT_MAX_BYTES + ROOM
    assert proxy_shape(Settings()).intake == ""


def test_nginx_text_carries_each_setting() -> None:
    text = nginx_config(proxy_shape(SETTINGS), listen="127.0.0.1:9000", server_name="sms.test")
    assert "listen 127.0.0.1:9000;" in text and "server_name sms.test;" in text
    assert "server 127.0.0.1:8123;" in text and "server 127.0.0.1:8124;" in text
    assert "client_header_timeout 1500ms;" in text and "client_body_timeout 20s;" in text
    assert f"client_max_body_size {proxy_shape(SETTINGS).body_limit_bytes};" in text
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in text
    assert text.count("proxy_request_buffering off;") == 2
    # A TLS block to fill in, commented out, unless a certificate is given.
    assert "# server {" in text and "ssl_certificate " not in text.replace("#     ssl", "")
    with_tls = nginx_config(proxy_shape(SETTINGS), tls_cert="/c.pem", tls_key="/k.pem")
    assert "listen 443 ssl;" in with_tls and "ssl_certificate /c.pem;" in with_tls
    # Without an intake, /callbacks/ goes to the server itself.
    alone = nginx_config(proxy_shape(Settings()))
    assert "appliance_reports" not in alone and "listen 80;" in alone


def test_nginx_refusals_are_json_in_our_shape() -> None:
    text = nginx_config(proxy_shape(SETTINGS))
    body = text.split("return 413 '", 1)[1].split("';", 1)[0]
    assert json.loads(body)["error"] == "payload_too_large"
    assert json.loads(body)["limit"] == 5_000_000


def test_the_command_reads_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "a.toml"
    config.write_text("port = 8200\n[import]\nmax_bytes = 20000000\n")
    text = printed_config(config, "nginx")
    assert "server 127.0.0.1:8200;" in text
    assert f"client_max_body_size {20_000_000 + 16 * 1024 + ROOM};" in text
    half = run_cli("proxy-config", "nginx", "--tls-cert", "x.pem", "--config", str(config),
                   check=False)
    assert half.returncode == 2 and "--tls-key" in half.stderr


@needs_nginx
@pytest.mark.parametrize("standalone", [True, False])
def test_nginx_accepts_what_is_printed(tmp_path: Path, standalone: bool) -> None:
    config = tmp_path / "a.toml"
    config.write_text("[reports]\nintake_port = 8124\n")
    text = printed_config(config, "nginx", *(["--standalone"] if standalone else []))
    (tmp_path / "logs").mkdir()
    conf = tmp_path / "nginx.conf"
    if standalone:
        conf.write_text(text)
    else:  # what /etc/nginx/nginx.conf does with conf.d/*.conf
        (tmp_path / "appliance.conf").write_text(
            text.replace("/var/log/nginx/appliance.access.log", "logs/access.log"))
        conf.write_text(f"events {{}}\nhttp {{\n    include {tmp_path}/appliance.conf;\n}}\n")
    checked = subprocess.run([NGINX, "-t", "-c", str(conf), "-p", f"{tmp_path}/",
                              "-e", str(tmp_path / "logs" / "error.log")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(not CADDY, reason="caddy is not installed (Debian package `caddy`;"
                    " .ci/run installs it)")
@pytest.mark.parametrize("args", [(), ("--server-name", "sms.example.org"),
                                  ("--listen", "127.0.0.1:8443", "--tls-cert", "CERT",
                                   "--tls-key", "KEY")])
def test_caddy_adapts_what_is_printed(tmp_path: Path, args: tuple[str, ...]) -> None:
    if "CERT" in args:  # --validate loads the certificate
        cert, key = make_certificate(tmp_path)
        args = tuple({"CERT": str(cert), "KEY": str(key)}.get(a, a) for a in args)
    config = tmp_path / "a.toml"
    config.write_text("[reports]\nintake_port = 8124\n[http]\nheader_timeout_s = 1.5\n")
    caddy_file = tmp_path / "Caddyfile"
    caddy_file.write_text(printed_config(config, "caddy", *args))
    assert CADDY is not None
    adapted = subprocess.run([CADDY, "adapt", "--config", str(caddy_file),
                              "--adapter", "caddyfile", "--validate"],
                             capture_output=True, text=True)
    assert adapted.returncode == 0, adapted.stderr
    assert "not formatted" not in adapted.stderr  # Caddy's own layout
    routes = json.dumps(json.loads(adapted.stdout))
    assert "127.0.0.1:8124" in routes and "127.0.0.1:8080" in routes
    assert "\"read_header_timeout\": 1500000000" in routes
    assert str(proxy_shape(Settings()).body_limit_bytes) in routes


def test_caddyfile_text() -> None:
    text = caddyfile(proxy_shape(SETTINGS), server_name="sms.example.org")
    assert text.startswith("# Made by") and "sms.example.org {" in text
    assert "\treverse_proxy 127.0.0.1:8124" in text
    assert "respond @too_large `{\"error\":\"payload_too_large\"" in text


@needs_nginx
def test_nginx_answers_json_when_the_appliance_is_down(tmp_path: Path) -> None:
    config = tmp_path / "a.toml"
    config.write_text(f"port = {free_port()}\n")  # nothing listens there
    nginx = Nginx.printed(tmp_path / "nginx", config).start()
    try:
        answer = httpx.get(nginx.url + "/healthz", timeout=30)
    finally:
        nginx.stop()
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["error"] == "unavailable"
