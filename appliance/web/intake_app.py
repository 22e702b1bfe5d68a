"""The report intake's process: ``/callbacks/{provider}`` on ``[reports] intake_port``.

A plain ASGI app under the same uvicorn setup as the server (the edge protocol's
timeouts and header limit, :mod:`appliance.web.listener`), serving the same endpoint as
the server's own port (:mod:`appliance.web.callback_endpoint`: the provider's reader,
the body limit, the signature, the reports) with a store of its own: the raw callback
and its reports sent to the server over the link (:mod:`appliance.reports.intake_link`),
and it answers the provider's ``2xx`` only once the server says they are committed:
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
from pathlib import Path
from typing import Any

from starlette.types import Receive, Scope, Send

from appliance.config import Settings
from appliance.provider_kinds import KINDS
from appliance.providers.registry import Providers
from appliance.reports.intake_link import callback_fields, frame, frames
from appliance.web.body_budget import BodyBudget
from appliance.web.callback_check import Checked
from appliance.web.callback_endpoint import CallbackEndpoint
from appliance.web.edge import STATS

log = logging.getLogger("appliance.callbacks")
METRICS_EVERY_S = 0.5
EXIT_AFTER_S = 0.5  # once the link is gone: time to send the waiting 503s


class Link(asyncio.Protocol):
    """The intake's end of the link: one future per callback sent to be stored.

    The frames sent in one turn of the event loop go in one write, at its end (the
    requests whose bodies came together are checked in the same turn): one system call
    here and one wake-up of the server's link thread for all of them, not one each."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bool]] = {}
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        # The loop the link runs on, kept from ``connection_made``: asking for the running
        # loop costs a system call a time on Python 3.11 (its process id is checked).
        self.loop: asyncio.AbstractEventLoop | None = None
        self.serial = 0
        self.gone = False
        self._unsent: list[bytes] = []  # frames of this turn of the loop

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's own class
        self.loop = asyncio.get_running_loop()

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
        if self.transport is None or self.gone:
            return
        if not self._unsent:
            (self.loop or asyncio.get_running_loop()).call_soon(self.flush)
        self._unsent.append(frame(message))

    def flush(self) -> None:
        """Write the frames of this turn (at its end, or at once before stopping)."""
        if not self._unsent:
            return
        unsent, self._unsent = self._unsent, []
        if self.transport is not None and not self.gone:
            self.transport.write(b"".join(unsent))

    def store(self, message: tuple[Any, ...]) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = (self.loop or asyncio.get_running_loop()).create_future()
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
        self.endpoint = CallbackEndpoint(
            self.providers, self.budget, settings.reports.max_callback_bytes,
            settings.report_callback_base, self._store, self._observe)
        self._link_sock = link_sock
        self._requests: list[tuple[str, int, float]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._edge_sent: tuple[Any, ...] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self.endpoint(scope, receive, send)

    def _store(self, checked: Checked) -> asyncio.Future[bool]:
        raw, reports = callback_fields(checked.raw, checked.reports)
        return self.link.store((checked.provider, raw, reports, checked.parse_error,
                                checked.signed_age_s, checked.inbound, checked.inbound_error))

    def _observe(self, method: str, status: int, seconds: float) -> None:
        self._requests.append((method if method in ("GET", "POST") else "OTHER", status,
                               seconds))

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
                self.link.flush()
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

