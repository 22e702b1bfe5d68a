"""The report intake's process: ``/callbacks/{provider}`` on ``[reports] intake_port``.

A plain ASGI app under the same uvicorn setup as the server (the edge protocol's
timeouts and header limit, :mod:`appliance.web.listener`). For each callback it does
what the server's route does up to the write (:mod:`appliance.web.callbacks`: the
provider's reader, the body limit, the signature, the reports), then sends the raw
callback and its reports to the server over the link (:mod:`appliance.reports.intake_link`)
and answers the provider's ``2xx`` only once the server says they are committed:
``503`` with ``Retry-After`` when the store failed or the server is gone. It opens no
database. When the link closes (the server stopped or died) it answers what is waiting
with ``503`` and exits.

Other paths are ``404``, other methods ``405``; every answer carries ``X-Request-Id``.
Its requests are counted in the server's ``/metrics`` (route
``/callbacks/{provider}``), and its edge's counts added to the server's own (open
connections, refusals, bodies held), sent there every :data:`METRICS_EVERY_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from starlette.types import Receive, Scope, Send

from appliance.config import Settings
from appliance.logs import request_id
from appliance.ops.observability.request_middleware import incoming_request_id, new_request_id
from appliance.provider_kinds import KINDS
from appliance.providers.registry import Providers
from appliance.reports.intake_link import frame, frames
from appliance.web.body_budget import BodyBudget, read_scope_pieces
from appliance.web.callback_check import (
    TOO_LARGE,
    TRY_AGAIN,
    check,
    inbound_reader_for,
    reader_for,
    refusal,
)
from appliance.web.edge import STATS
from appliance.web.errors import ApiError

log = logging.getLogger("appliance.callbacks")
PREFIX = "/callbacks/"
METRICS_EVERY_S = 0.5
EXIT_AFTER_S = 0.5  # once the link is gone: time to send the waiting 503s


class Link(asyncio.Protocol):
    """The intake's end of the link: one future per callback sent to be stored."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bool]] = {}
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.serial = 0
        self.gone = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's own class

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        for future in self.waiting.values():
            if not future.done():
                future.set_result(False)
        self.waiting.clear()
        log.warning("report intake: the server is gone; exiting")
        asyncio.get_running_loop().call_later(EXIT_AFTER_S, os._exit, 0)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for message in frames(self.buffer):
            if message[0] == "stored":
                for ident, ok in message[1]:
                    future = self.waiting.pop(ident, None)
                    if future is not None and not future.done():
                        future.set_result(ok)

    def send(self, message: tuple[Any, ...]) -> None:
        if self.transport is not None and not self.gone:
            self.transport.write(frame(message))

    def store(self, message: tuple[Any, ...]) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self.gone or self.transport is None:
            future.set_result(False)
            return future
        self.serial += 1
        self.waiting[self.serial] = future
        self.send(("store", self.serial, *message))
        return future


class IntakeApp:
    """The ASGI app of the intake's process."""

    def __init__(self, settings: Settings, link_sock: socket.socket) -> None:
        self.settings = settings
        # The intake is its own process: it builds its providers by every kind itself.
        self.providers = Providers(settings, KINDS)
        self.budget = BodyBudget(settings.http.max_inflight_body_bytes)
        self.link = Link()
        self._link_sock = link_sock
        self._requests: list[tuple[str, int, float]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._edge_sent: tuple[Any, ...] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        rid = incoming_request_id(scope) or new_request_id()
        token = request_id.set(rid)
        started = time.perf_counter()
        method = str(scope.get("method", "GET"))
        status = 500
        try:
            status, headers, content = await self._answer(scope, receive)
        except ApiError as exc:
            status, headers, content = _refusal(exc)
        finally:
            self.budget.release(scope)
            request_id.reset(token)
        headers = [*headers, (b"content-length", str(len(content)).encode()),
                   (b"x-request-id", rid.encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
        self._requests.append((method if method in ("GET", "POST") else "OTHER", status,
                               time.perf_counter() - started))

    async def _answer(self, scope: Scope, receive: Receive
                      ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        path = str(scope.get("path", ""))
        name = path[len(PREFIX):] if path.startswith(PREFIX) else ""
        if not name or "/" in name:
            raise ApiError(404, "not_found", "no such route on the report intake's port")
        if scope.get("method") not in ("GET", "POST"):
            raise ApiError(405, "method_not_allowed", "send GET or POST")
        reader = reader_for(self.providers, name)
        pieces = await read_scope_pieces(scope, receive,
                                         self.settings.reports.max_callback_bytes, self.budget)
        if pieces is None:
            raise TOO_LARGE
        body = b"".join(pieces)
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        url = self.settings.report_callback_base + path + (f"?{query}" if query else "")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        checked = check(reader, name, str(scope["method"]), url, query, headers, body,
                        inbound_reader_for(self.providers, name))
        stored = await self.link.store((name, checked.raw, checked.reports,
                                        checked.parse_error, checked.signed_age_s,
                                        checked.inbound, checked.inbound_error))
        if not stored:
            raise TRY_AGAIN
        status, content, media_type = checked.answer
        return status, [(b"content-type", media_type.encode("latin-1"))], content

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                loop = asyncio.get_running_loop()
                await loop.connect_accepted_socket(lambda: self.link, self._link_sock)
                self._flusher = loop.create_task(self._flush_requests())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._flusher is not None:
                    self._flusher.cancel()
                self._send_requests()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _flush_requests(self) -> None:
        while True:
            await asyncio.sleep(METRICS_EVERY_S)
            self._send_requests()

    def _send_requests(self) -> None:
        if self._requests:
            requests, self._requests = self._requests, []
            self.link.send(("requests", requests))
        edge = (STATS.open_connections, dict(STATS.refused), self.budget.held,
                self.budget.refused)
        if edge != self._edge_sent:
            self._edge_sent = edge
            self.link.send(("edge", *edge))


def _refusal(exc: ApiError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """As :func:`appliance.web.callback_check.refusal` answers, for a plain ASGI app."""
    response = refusal(exc)
    headers = [(k, v) for k, v in response.raw_headers if k != b"content-length"]
    if exc.status == 405:
        headers.append((b"allow", b"GET, POST"))
    return response.status_code, headers, bytes(response.body)


def serve_intake(listening: socket.socket, link_sock: socket.socket, settings: Settings,
                 log_file: Path | None, secrets: list[str]) -> None:  # pragma: no cover
    """The intake process's main (spawned by :class:`appliance.web.intake_process.ReportIntake`)."""
    import uvicorn

    from appliance.logs import setup_logging
    from appliance.web.listener import uvicorn_config

    setup_logging(settings.log_format, settings.log_level, settings.log_full_numbers,
                  secrets, path=log_file)
    config = uvicorn_config(IntakeApp(settings, link_sock), settings,
                            port=settings.reports.intake_port)
    config.timeout_graceful_shutdown = max(1, int(settings.shutdown_timeout_s / 2))
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[listening])

