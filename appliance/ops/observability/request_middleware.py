"""Request ids and request metrics, as one plain ASGI middleware.

Every HTTP request gets an id: the caller's ``X-Request-Id`` when it is a sane token
(up to 128 of ``A-Z a-z 0-9 . _ -``), else a new one. It is echoed in the response's
``X-Request-Id`` and put on every log line written while the request is handled.
Each request is counted by route *template* (``/api/jobs/{id}``, never the raw
path, so hostile paths cannot grow the metrics), method and status.
"""

from __future__ import annotations

import itertools
import logging
import re
import secrets
import time

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from appliance.logs import request_id, sampled_line
from appliance.ops.observability.metrics import Metrics

log = logging.getLogger("appliance.http")
_SANE_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# A new request id: a random prefix per process and a counter (uuid4 for each request
# cost a getrandom system call: tens of microseconds on a busy VM).
_PREFIX = secrets.token_hex(8)
_COUNTER = itertools.count(1)


def new_request_id() -> str:
    return f"{_PREFIX}{next(_COUNTER):016x}"


def incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SANE_ID.match(text) else None
    return None


class RequestMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = incoming_request_id(scope) or new_request_id()
        token = request_id.set(rid)
        status = 500
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message).append("X-Request-Id", rid)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            observe_request(self.metrics, str(getattr(route, "path", "") or "unmatched"),
                            str(scope.get("method", "GET")), status,
                            time.perf_counter() - started)
            request_id.reset(token)


def observe_request(metrics: Metrics, template: str, method: str, status: int,
                    seconds: float) -> None:
    """One answered request in the metrics (``method`` outside :data:`METHODS` counted as
    ``OTHER``), and a server error in the log, summed up per route and status: a full
    disk fails them all."""
    metrics.observe_request(template, method if method in METHODS else "OTHER", status,
                            seconds)
    if status >= 500:
        sampled_line(log, "request failed", level=logging.WARNING,
                     detail_key="status").note(f"{template} {status}", status, route=template)
