"""What a proxy in front must know about the appliance, read from the settings.

Pure: :func:`proxy_shape` takes :class:`~appliance.config.Settings` and returns the
figures both generators (:mod:`appliance.proxy.nginx`, :mod:`appliance.proxy.caddy`)
print. Each figure is one the proxy would otherwise hold at a default that breaks us:

* the **body limit** covers the largest body any route takes (``[import] max_bytes``,
  the console's import form, a suppression list, a consent file, a report) plus
  :data:`ROOM`, so a body
  just past our own limit reaches us and the client gets *our* ``413`` with ``limit``
  (note 001: a proxy's size limit is a setting apart from its timeout, and its refusal
  looks nothing like ours);
* the **timeouts** are ``[http] header_timeout_s`` and ``body_timeout_s``, so a slow
  client is cut by the proxy at the moment we would cut it;
* the **upstreams** are ``port`` and, when set, ``[reports] intake_port`` for
  ``/callbacks/`` (the report intake's own process, docs/reports.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from appliance.config import Settings
from appliance.optout.consent_input import MAX_BYTES as CONSENT_MAX_BYTES
from appliance.optout.suppression_import import MAX_BYTES as SUPPRESSION_MAX_BYTES

# Past the largest body we take, what the proxy still lets through so that our own 413
# (JSON, with the limit) is the answer rather than the proxy's.
ROOM = 1024 * 1024
# The console's import form takes a multipart body: the file plus the form's fields.
FORM_OVERHEAD = 16 * 1024
# How long the proxy waits for our answer once the request is sent. Every route answers
# in seconds (an import is accepted and queued, never worked in the request: note 001).
READ_TIMEOUT_S = 60
CONNECT_TIMEOUT_S = 5
# The routes whose bodies we read as they stream and may refuse before they end
# (too_many_rows with at_least): the proxy must pass them on unbuffered.
STREAMED_ROUTES = ("/api/contacts/import", "/import")


@dataclass(frozen=True)
class ProxyShape:
    upstream: str  # host:port of `appliance serve`
    intake: str  # host:port of the report intake, "" when callbacks go to `upstream`
    body_limit_bytes: int  # every route
    callback_limit_bytes: int  # /callbacks/
    import_max_bytes: int  # ours, named in the proxy's own 413
    header_timeout_s: float
    body_timeout_s: float
    max_header_bytes: int
    read_timeout_s: int = READ_TIMEOUT_S
    connect_timeout_s: int = CONNECT_TIMEOUT_S


def reachable_host(host: str) -> str:
    """The address a proxy on this machine dials for a server listening on ``host``: a
    wildcard listen is reached on loopback; an IPv6 address in brackets."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def proxy_shape(settings: Settings) -> ProxyShape:
    host = reachable_host(settings.host)
    largest = max(settings.imports.max_bytes + FORM_OVERHEAD, SUPPRESSION_MAX_BYTES,
                  CONSENT_MAX_BYTES, settings.reports.max_callback_bytes)
    intake_port = settings.reports.intake_port
    return ProxyShape(
        upstream=f"{host}:{settings.port}",
        intake=f"{host}:{intake_port}" if intake_port else "",
        body_limit_bytes=largest + ROOM,
        callback_limit_bytes=settings.reports.max_callback_bytes + ROOM,
        import_max_bytes=settings.imports.max_bytes,
        header_timeout_s=settings.http.header_timeout_s,
        body_timeout_s=settings.http.body_timeout_s,
        max_header_bytes=settings.http.max_header_bytes,
    )


def refusal_json(error: str, message: str, **extra: int) -> str:
    """A refusal the proxy answers itself, in our shape (``{"error", "message", ...}``):
    one line, no quote characters of the proxy's own syntax in it."""
    return json.dumps({"error": error, "message": message, **extra}, separators=(",", ":"))
