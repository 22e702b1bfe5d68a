"""``appliance proxy-config caddy``: the same proxy as :mod:`appliance.proxy.nginx`, as a
Caddyfile (Caddy 2, https://caddyserver.com/docs/caddyfile).

Pure: :func:`caddyfile` turns a :class:`~appliance.proxy.shape.ProxyShape` into text.
Caddy's ``reverse_proxy`` streams request bodies as they come and sets
``X-Forwarded-For``/``-Proto``/``-Host`` by itself; what must be said is the body
limit (``request_body max_size``, with room for our own ``413``), the timeouts of
``[http]`` (global ``servers { timeouts }``) and where ``/callbacks/`` goes.
"""

from __future__ import annotations

import math

from appliance.proxy.shape import ProxyShape, refusal_json


def duration(seconds: float) -> str:
    """A Caddy duration, never shorter than ours."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{math.ceil(seconds * 1000)}ms"


def caddyfile(shape: ProxyShape, *, listen: str = "", server_name: str = "",
              tls_cert: str = "", tls_key: str = "") -> str:
    """The Caddyfile. The site is ``server_name`` (Caddy then gets and renews its
    certificate) or every host name on ``listen``'s port (its address bound);
    ``tls_cert``/``tls_key`` name a certificate of one's own."""
    tls = bool(tls_cert and tls_key)
    too_large = refusal_json(
        "payload_too_large", f"the request is larger than the limit of"
        f" {shape.import_max_bytes} bytes; split it and send it in parts",
        limit=shape.import_max_bytes)
    unavailable = refusal_json("unavailable", "the appliance is not answering; try again shortly")
    address, _, port = listen.rpartition(":") if ":" in listen else ("", "", listen)
    # A site of a port only answers every host name; the address goes to `bind` (a site
    # written `http://127.0.0.1:8080` would answer only requests whose Host is that).
    if server_name and server_name != "_":
        site = f"{server_name}:{port}" if port else server_name
    else:
        site = f"{'https' if tls else 'http'}://:{port or ('443' if tls else '80')}"
    lines = [
        "# Made by `appliance proxy-config caddy` from the settings in force; print it",
        "# again when port, [reports] intake_port, [import] max_bytes or [http] change.",
        "{",
        "    servers {",
        "        # [http] header_timeout_s and body_timeout_s.",
        "        timeouts {",
        f"            read_header {duration(shape.header_timeout_s)}",
        f"            read_body {duration(shape.body_timeout_s)}",
        "        }",
        "        # Past ours, so our own 431 (JSON) is the answer.",
        f"        max_header_size {shape.max_header_bytes * 2}",
        "    }",
        "}",
        "",
        f"{site} {{",
    ]
    if address:
        lines.append(f"    bind {address.strip('[]')}")
    if tls:
        lines.append(f"    tls {tls_cert} {tls_key}")
    lines += [
        "    # Above [import] max_bytes (and every other route's limit) with room, so the",
        "    # appliance's own 413, with its limit, is the one a client sees.",
        "    request_body {",
        f"        max_size {shape.body_limit_bytes}",
        "    }",
        "    handle /callbacks/* {",
        f"        reverse_proxy {shape.intake or shape.upstream}",
        "    }",
        "    # Caddy's own refusals in our shape: every refusal is JSON.",
        "    handle_errors {",
        "        @too_large expression {err.status_code} == 413",
        "        header @too_large Content-Type application/json",
        f"        respond @too_large `{too_large}` 413",
        "        @unavailable expression {err.status_code} in [502, 504]",
        "        header @unavailable Content-Type application/json",
        "        header @unavailable Retry-After 5",
        f"        respond @unavailable `{unavailable}` 503",
        "    }",
        "    handle {",
        f"        reverse_proxy {shape.upstream} {{",
        "            header_up Host {host}",
        "            transport http {",
        f"                dial_timeout {shape.connect_timeout_s}s",
        f"                response_header_timeout {shape.read_timeout_s}s",
        "            }",
        "        }",
        "    }",
        "}",
    ]
    # Caddy's own layout (`caddy fmt`): a tab a level.
    return "\n".join(_tabs(line) for line in lines) + "\n"


def _tabs(line: str) -> str:
    stripped = line.lstrip(" ")
    return "\t" * ((len(line) - len(stripped)) // 4) + stripped
