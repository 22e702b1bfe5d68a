"""The HTTP connection at the edge (EDGE-1, EDGE-2): read timeouts and a header limit.

uvicorn's httptools protocol waits for headers and bodies as long as a client likes
and reads headers of any size. This subclass of it adds, per connection:

* ``[http] header_timeout_s``: the request line and headers must all arrive within
  this time of the connection opening (or of the first byte of the next request on
  a kept-alive connection). Past it the connection is closed: silently when nothing
  came, with ``408`` when part of a request did.
* ``[http] body_timeout_s``: once the headers are in, the body must keep coming. The
  connection is closed (``408`` when no answer has started) when no byte of it
  arrived for this long, or when it arrives slower than :data:`MIN_BODY_RATE` on
  average beyond an allowance of this long (a 64 MB import at 64 KiB/s still fits;
  a body that trickles a byte at a time does not). Time the appliance itself holds
  the body back (it is busy with the bytes already read) does not count.
* ``[http] max_header_bytes``: more bytes than this before the headers end is
  ``431``; nothing past the limit is parsed or kept.

Every answer written here is JSON ``{"error", "message"}``, as the application's are;
after one, the connection reads and drops what the client still sends for a moment
(so the client sees the answer rather than a reset) and then closes.

A connection that has not finished its headers holds no request slot: only requests
the application is handling count towards the in-flight cap
(:mod:`appliance.web.last_resort`), so thousands of slow or idle sockets cannot keep
``/healthz`` or ``/callbacks/*`` from answering.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from asyncio import TimerHandle
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from appliance.config import HttpSettings

log = logging.getLogger("appliance.http")
MIN_BODY_RATE = 64 * 1024  # bytes per second, on average, beyond the allowance
LINGER_S = 2.0  # after an answer written here: read and drop for this long, then close
TIMED_OUT = "appliance.timed_out"  # set in the request's scope when its body timed out


@dataclass
class EdgeStats:
    """What the edge did, process-wide, for ``/metrics``."""

    open_connections: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # by error code


STATS = EdgeStats()


def error_bytes(status: int, reason: str, error: str, message: str) -> bytes:
    body = json.dumps({"error": error, "message": message}).encode("utf-8")
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header/body timeouts and the header limit."""

    header_timeout_s: float = HttpSettings.header_timeout_s
    body_timeout_s: float = HttpSettings.body_timeout_s
    max_header_bytes: int = HttpSettings.max_header_bytes

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._header_timer: TimerHandle | None = None
        self._body_timer: TimerHandle | None = None
        self._in_headers = True
        # When the headers being waited for began (the connection, or the first byte of
        # a request); None between requests on a kept-alive connection.
        self._header_since: float | None = None
        self._in_body = False
        self._header_bytes = 0
        self._body_started = 0.0
        self._body_last = 0.0
        self._body_bytes = 0
        self._lingering = False

    # -- connection ------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        STATS.open_connections += 1
        self._header_since = self.loop.time()
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        STATS.open_connections -= 1
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._in_headers:
            room = self.max_header_bytes - self._header_bytes
            if len(data) > room:
                head, rest = data[:max(room, 0)], data[max(room, 0):]
                self._header_bytes += len(head)
                if head:
                    super().data_received(head)
                if self.transport.is_closing() or self._lingering:
                    return
                if self._in_headers:
                    self._answer_and_close(
                        431, "Request Header Fields Too Large", "headers_too_large",
                        f"the request line and headers are larger than {self.max_header_bytes}"
                        " bytes")
                    return
                if rest:
                    self.data_received(rest)
                return
            self._header_bytes += len(data)
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        self._answer_and_close(400, "Bad Request", "bad_request",
                               "this is not a valid HTTP/1.1 request")

    # -- parser callbacks --------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_since is None:  # the first request's time runs from the connection
            self._header_since = self.loop.time()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_since = None
        super().on_headers_complete()
        now = self.loop.time()
        self._body_started = self._body_last = now
        self._body_bytes = 0
        self._in_body = True
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_check)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        self._body_last = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._in_headers = True
        self._header_bytes = 0
        super().on_message_complete()

    # -- timers ----------------------------------------------------------------
    # A timer is not cancelled when its phase ends: it finds the phase over when it
    # fires, or a later one begun, and waits out what is left of that one. Arming and
    # cancelling two timers a request cost more than the rest of the edge together.
    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_late)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _header_late(self) -> None:
        self._header_timer = None
        since = self._header_since
        if self.transport.is_closing() or not self._in_headers or since is None:
            return
        left = since + self.header_timeout_s - self.loop.time()
        if left > 0:  # armed for an earlier request's headers: these began later
            self._header_timer = self.loop.call_later(left, self._header_late)
            return
        if self._header_bytes == 0:
            STATS.refused["idle_timeout"] += 1
            self.transport.close()
            return
        self._answer_and_close(408, "Request Timeout", "request_timeout",
                               f"the request headers did not arrive within"
                               f" {self.header_timeout_s:g} s")

    def _body_check(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or not self._in_body:
            return
        now = self.loop.time()
        if self.flow is not None and self.flow.read_paused:
            # We hold the body back (the application is busy): not the client's delay.
            self._body_last = now
            self._body_started = now - self._body_bytes / MIN_BODY_RATE
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_check)
            return
        deadline = min(self._body_last + self.body_timeout_s,
                       self._body_started + self.body_timeout_s
                       + self._body_bytes / MIN_BODY_RATE)
        if now < deadline:
            self._body_timer = self.loop.call_later(deadline - now, self._body_check)
            return
        cycle = self.cycle
        if cycle is not None:
            cycle.scope[TIMED_OUT] = True  # type: ignore[literal-required]
        if cycle is not None and not cycle.response_started:
            # The application's own answer would go nowhere: it sees a disconnect.
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer_and_close(408, "Request Timeout", "request_timeout",
                                   "the request body stopped arriving or arrived too slowly")
        else:
            STATS.refused["request_timeout"] += 1
            self.transport.close()

    def _answer_and_close(self, status: int, reason: str, error: str, message: str) -> None:
        """Write one JSON answer, stop reading requests, close after a short linger."""
        self._cancel_timers()
        self._lingering = True
        STATS.refused[error] += 1
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.write(error_bytes(status, reason, error, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self.flow is not None:
            self.flow.resume_reading()
        self.loop.call_later(LINGER_S, self.transport.close)


def edge_protocol(http: HttpSettings) -> type[EdgeProtocol]:
    """The protocol class uvicorn should use, with this server's limits."""
    return type("ConfiguredEdgeProtocol", (EdgeProtocol,), {
        "header_timeout_s": http.header_timeout_s,
        "body_timeout_s": http.body_timeout_s,
        "max_header_bytes": http.max_header_bytes,
    })


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one (each connection is a file)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # pragma: no cover - depends on the host
            log.warning("cannot raise the open files limit: %s", exc)
    return soft
