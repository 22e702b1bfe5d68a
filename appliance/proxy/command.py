"""``appliance proxy-config nginx|caddy``: print the proxy's configuration for the
settings in force (the generators are :mod:`appliance.proxy.nginx` and
:mod:`appliance.proxy.caddy`; this module only reads the settings and prints)."""

from __future__ import annotations

from typing import Any

import click

from appliance.cli import CONTEXT, data_dir_option, settings_from
from appliance.proxy.caddy import caddyfile
from appliance.proxy.nginx import nginx_config
from appliance.proxy.shape import proxy_shape


def _proxy_options(fn: Any) -> Any:
    fn = click.option("--tls-key", default="", metavar="FILE",
                      help="The certificate's private key (with --tls-cert).")(fn)
    fn = click.option("--tls-cert", default="", metavar="FILE",
                      help="A certificate: adds a TLS server on --listen.")(fn)
    fn = click.option("--server-name", default=None, metavar="NAME",
                      help="The public host name (e.g. sms.example.org).")(fn)
    return click.option("--listen", default="", metavar="ADDR:PORT",
                        help="Where the proxy listens (default 80, 443 with --tls-cert).")(fn)


def _check_tls(tls_cert: str, tls_key: str) -> None:
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")


@click.group("proxy-config", context_settings=CONTEXT)
def proxy_config_command() -> None:
    """Print the configuration of a proxy in front, made from the settings in force
    (port, [reports] intake_port, [import] max_bytes, [http] timeouts)."""


@proxy_config_command.command("nginx")
@data_dir_option
@_proxy_options
@click.option("--standalone", is_flag=True,
              help="A whole nginx.conf for `nginx -c FILE -p PREFIX` (pid, logs and temp"
                   " paths under PREFIX).")
def nginx(data_dir: str | None, config_file: str | None, listen: str,
          server_name: str | None, tls_cert: str, tls_key: str, standalone: bool) -> None:
    """An nginx configuration: the server blocks for conf.d/, or with --standalone a
    whole nginx.conf."""
    _check_tls(tls_cert, tls_key)
    shape = proxy_shape(settings_from(data_dir, config_file))
    click.echo(nginx_config(shape, listen=listen, server_name=server_name or "_",
                            standalone=standalone, tls_cert=tls_cert, tls_key=tls_key),
               nl=False)


@proxy_config_command.command("caddy")
@data_dir_option
@_proxy_options
def caddy(data_dir: str | None, config_file: str | None, listen: str,
          server_name: str | None, tls_cert: str, tls_key: str) -> None:
    """A Caddyfile for the same proxy."""
    _check_tls(tls_cert, tls_key)
    shape = proxy_shape(settings_from(data_dir, config_file))
    click.echo(caddyfile(shape, listen=listen, server_name=server_name or "",
                         tls_cert=tls_cert, tls_key=tls_key), nl=False)
