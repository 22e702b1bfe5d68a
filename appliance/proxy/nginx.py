"""``appliance proxy-config nginx``: an nginx configuration for the settings in force.

Pure: :func:`nginx_config` turns a :class:`~appliance.proxy.shape.ProxyShape` into text.
What each directive is for (nginx's own reference, https://nginx.org/en/docs/):

* ``client_max_body_size`` above our largest body (ours is the ``413`` a client sees);
  nginx's own ``413`` for a body past even that, and its ``502``/``504`` when we are
  down, are answered as JSON in our shape (``error_page``), since every refusal is JSON;
* ``proxy_request_buffering off`` on the import routes: nginx passes the body on as it
  arrives, so our row limit is decided while the body streams (``proxy_http_version
  1.1``, without which a chunked body is buffered whatever the setting says);
* ``client_header_timeout``/``client_body_timeout`` from ``[http]``: a slow client is
  held and cut by nginx, never by one of our connections;
* ``X-Forwarded-Proto``/``X-Forwarded-For``/``Host``: our ``Secure`` cookies and logs
  (uvicorn trusts them from 127.0.0.1; Twilio signatures are checked against
  ``public_url`` whatever these say). ``X-Forwarded-For`` is set, not appended to, so a
  client cannot choose the address the sign-in guard counts;
* ``/callbacks/`` to the report intake's port when ``[reports] intake_port`` is set.

``standalone`` wraps it in a whole ``nginx.conf`` for ``nginx -c FILE -p PREFIX``: pid,
logs and temp paths relative to the prefix, in the foreground.
"""

from __future__ import annotations

import math

from appliance.proxy.shape import STREAMED_ROUTES, ProxyShape, refusal_json


def duration(seconds: float) -> str:
    """An nginx time: whole seconds as ``10s``, else milliseconds (never shorter)."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{math.ceil(seconds * 1000)}ms"


def _json_answer(status: int, error: str, message: str, **extra: int) -> str:
    return f"return {status} '{refusal_json(error, message, **extra)}';"


def _refusals(shape: ProxyShape) -> list[str]:
    too_large = _json_answer(
        413, "payload_too_large",
        f"the request is larger than the limit of {shape.import_max_bytes} bytes;"
        " split it and send it in parts", limit=shape.import_max_bytes)
    unavailable = _json_answer(503, "unavailable",
                               "the appliance is not answering; try again shortly")
    return [
        "    # nginx's own refusals in our shape: every refusal is JSON.",
        "    error_page 413 @too_large;",
        "    error_page 502 504 =503 @unavailable;",
        "    location @too_large {",
        "        default_type application/json;",
        f"        {too_large}",
        "    }",
        "    location @unavailable {",
        "        default_type application/json;",
        "        add_header Retry-After 5 always;",
        f"        {unavailable}",
        "    }",
    ]


def _server_body(shape: ProxyShape, access_log: str) -> list[str]:
    header_kib = max(1, math.ceil(shape.max_header_bytes / 1024))
    lines = [
        f"    access_log {access_log} appliance;",
        "    # [http] header_timeout_s and body_timeout_s: a slow client waits here, not in",
        "    # one of the appliance's connections.",
        f"    client_header_timeout {duration(shape.header_timeout_s)};",
        f"    client_body_timeout {duration(shape.body_timeout_s)};",
        f"    send_timeout {duration(shape.body_timeout_s)};",
        f"    large_client_header_buffers 4 {header_kib}k;",
        "    # Above [import] max_bytes (and every other route's limit) with room, so the",
        "    # appliance's own 413, with its limit, is the one a client sees.",
        f"    client_max_body_size {shape.body_limit_bytes};",
        "",
        "    proxy_http_version 1.1;",
        '    proxy_set_header Connection "";',
        "    proxy_set_header Host $http_host;",
        "    proxy_set_header X-Forwarded-Proto $scheme;",
        "    proxy_set_header X-Forwarded-Host $http_host;",
        "    proxy_set_header X-Forwarded-For $remote_addr;",
        f"    proxy_connect_timeout {duration(shape.connect_timeout_s)};",
        f"    proxy_send_timeout {duration(shape.body_timeout_s)};",
        f"    proxy_read_timeout {duration(shape.read_timeout_s)};",
        "",
        "    location / {",
        "        proxy_pass http://appliance;",
        "    }",
    ]
    for route in STREAMED_ROUTES:
        lines += [
            "    # Streamed on: the row limit is decided while the body arrives.",
            f"    location = {route} {{",
            "        proxy_request_buffering off;",
            "        proxy_pass http://appliance;",
            "    }",
        ]
    lines += [
        "    location /callbacks/ {",
        f"        client_max_body_size {shape.callback_limit_bytes};",
        f"        proxy_pass http://{'appliance_reports' if shape.intake else 'appliance'};",
        "    }",
        *_refusals(shape),
    ]
    return lines


def _upstreams(shape: ProxyShape) -> list[str]:
    lines = [
        "# Which process answered and how long it took (note 001: a 504 at exactly the",
        "# read timeout is a request cut off; ours are answered in seconds).",
        "log_format appliance '$remote_addr [$time_local] \"$request\" $status $body_bytes_sent'",
        "                     ' upstream=$upstream_addr $upstream_status'",
        "                     ' upstream_s=$upstream_response_time request_s=$request_time';",
        "upstream appliance {",
        f"    server {shape.upstream};",
        "    keepalive 16;",
        "}",
    ]
    if shape.intake:
        lines += [
            "# [reports] intake_port: the report intake's own process takes /callbacks/.",
            "upstream appliance_reports {",
            f"    server {shape.intake};",
            "    keepalive 16;",
            "}",
        ]
    return lines


def _listen_port(listen: str) -> str:
    return listen.rsplit(":", 1)[-1]


def nginx_config(shape: ProxyShape, *, listen: str = "", server_name: str = "_",
                 standalone: bool = False, tls_cert: str = "", tls_key: str = "") -> str:
    """The configuration text. Without ``standalone``, the blocks for an ``http {}``
    context (``/etc/nginx/conf.d/``); with it, a whole ``nginx.conf``. ``listen``
    defaults to 443 with a certificate, 80 without; without a certificate a TLS server
    block to fill in is printed commented out (not in ``standalone``)."""
    tls = bool(tls_cert and tls_key)
    listen = listen or ("443" if tls else "80")
    server = [
        "server {",
        f"    listen {listen}{' ssl' if tls else ''};",
        f"    server_name {server_name};",
    ]
    if tls:
        server += [
            f"    ssl_certificate {tls_cert};",
            f"    ssl_certificate_key {tls_key};",
            "    ssl_protocols TLSv1.2 TLSv1.3;",
        ]
    access_log = "logs/access.log" if standalone else "/var/log/nginx/appliance.access.log"
    server += [*_server_body(shape, access_log), "}"]
    blocks = [*_upstreams(shape), "", *server]
    if not tls and not standalone:
        port = _listen_port(listen)
        blocks += [
            "",
            "# TLS: fill in the certificate, uncomment, and make the block above redirect",
            "# (return 301 https://$host$request_uri;), or print again with --tls-cert and",
            "# --tls-key. Keep the directives of the block above in it.",
            "# server {",
            "#     listen 443 ssl;",
            f"#     server_name {server_name};",
            "#     ssl_certificate /etc/ssl/certs/appliance.pem;",
            "#     ssl_certificate_key /etc/ssl/private/appliance.key;",
            f"#     # ... the directives of the server on port {port} ...",
            "# }",
        ]
    header = ["# Made by `appliance proxy-config nginx` from the settings in force; print it",
              "# again when port, [reports] intake_port, [import] max_bytes or [http] change."]
    if not standalone:
        return "\n".join([*header, *blocks]) + "\n"
    indented = [f"    {line}" if line else "" for line in blocks]
    whole = [
        *header,
        "# Run: nginx -c THIS_FILE -p PREFIX (PREFIX/logs must exist).",
        "daemon off;",
        "worker_processes 1;",
        "pid logs/nginx.pid;",
        "error_log logs/error.log warn;",
        "events {",
        "    worker_connections 1024;",
        "}",
        "http {",
        "    client_body_temp_path client_body_temp;",
        "    proxy_temp_path proxy_temp;",
        "    fastcgi_temp_path fastcgi_temp;",
        "    uwsgi_temp_path uwsgi_temp;",
        "    scgi_temp_path scgi_temp;",
        "",
        *indented,
        "}",
    ]
    return "\n".join(whole) + "\n"
