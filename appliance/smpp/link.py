"""One TCP connection to the SMSC, bound in one mode (transceiver, transmitter, receiver).

The link owns the socket, the sequence numbers and the table of requests waiting for
their response. It answers the SMSC's ``enquire_link`` and ``unbind`` itself, sends
its own ``enquire_link`` every ``enquire_link_s`` (no answer within
``response_timeout_s`` closes it), and passes each ``deliver_sm`` to the session.

Whether a request was written is exact: :meth:`Link.send_request` raises
:class:`NotWritten` when the connection is already closing, and otherwise hands the
bytes to the transport before it returns. A request whose response never comes fails
with :class:`LinkLost` when the link closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from appliance.smpp import pdu
from appliance.smpp.settings import SmppSettings
from appliance.smpp.status import ESME_RINVCMDID, ESME_ROK, status_name
from appliance.smpp.submission import Segment

log = logging.getLogger("appliance.smpp")

LinkMode = Literal["transceiver", "transmitter", "receiver"]
MAX_SEQUENCE = 0x7FFFFFFF
EXPIRED_KEPT = 10_000  # timed-out submit_sm remembered for a late submit_sm_resp


class LinkLost(Exception):
    """The link closed before the response came (the request had been written)."""


class NotWritten(Exception):
    """The link was not open: nothing was written."""


class BindRefused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status_name(status))
        self.status = status


class Link:
    def __init__(
        self,
        settings: SmppSettings,
        mode: LinkMode,
        *,
        on_deliver: Callable[[Link, bytes], None],
        on_late: Callable[[Segment, bytes], None],
        now_ms: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.mode = mode
        self._on_deliver = on_deliver
        self._on_late = on_late
        self._now_ms = now_ms
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._expired: OrderedDict[int, Segment] = OrderedDict()
        self._sequence = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()
        self.close_reason = ""
        self.bound = False
        self.bound_at_ms: int | None = None
        self.smsc_system_id = ""

    # -- opening and closing -------------------------------------------------------------

    async def open(self) -> None:
        """Connect and bind; raises :class:`BindRefused`, ``OSError``, ``TimeoutError``."""
        s = self.settings
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(s.host, s.port), s.connect_timeout_s)
        self._tasks.append(asyncio.create_task(self._read_loop(), name=f"smpp-{self.mode}-read"))
        command = pdu.BIND_COMMANDS[self.mode]
        try:
            resp = await self.request(
                lambda seq: pdu.bind(command, seq, system_id=s.system_id, password=s.password,
                                     system_type=s.system_type),
                s.bind_timeout_s)
        except BaseException:
            self.close("bind not answered")
            raise
        head = pdu.header(resp)
        if head.status != ESME_ROK:
            self.close(f"bind refused: {status_name(head.status)}")
            raise BindRefused(head.status)
        self.smsc_system_id = pdu.read_message_id(resp)
        self.bound = True
        self.bound_at_ms = self._now_ms()
        self._tasks.append(asyncio.create_task(self._enquire_loop(),
                                               name=f"smpp-{self.mode}-enquire"))

    def close(self, reason: str) -> None:
        """Close at once; every request still waiting fails with :class:`LinkLost`."""
        if self.closed.is_set():
            return
        self.bound = False
        self.close_reason = reason
        self.closed.set()
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(LinkLost(reason))
        if self._writer is not None:
            self._writer.close()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def unbind(self, timeout_s: float) -> None:
        """Say goodbye (``unbind``, wait for ``unbind_resp``) and close."""
        with contextlib.suppress(NotWritten, LinkLost, TimeoutError, OSError):
            await self.request(pdu.unbind, timeout_s)
        self.close("unbound")

    # -- writing -------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return (self._writer is not None and not self.closed.is_set()
                and not self._writer.transport.is_closing())

    def _next_sequence(self) -> int:
        self._sequence = self._sequence % MAX_SEQUENCE + 1
        return self._sequence

    def send_request(self, build: Callable[[int], bytes]) -> tuple[int, asyncio.Future[bytes]]:
        """Write one request; its response will resolve the future.

        :class:`NotWritten` when the link is not open (nothing left the process).
        """
        if not self.writable or self._writer is None:
            raise NotWritten(self.close_reason or "not connected")
        seq = self._next_sequence()
        data = build(seq)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[seq] = fut
        self._writer.write(data)
        return seq, fut

    async def drain(self) -> None:
        if self._writer is not None:
            await self._writer.drain()

    async def request(self, build: Callable[[int], bytes], timeout_s: float) -> bytes:
        seq, fut = self.send_request(build)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(seq, None)

    def expire(self, seq: int, segment: Segment) -> None:
        """Stop waiting for ``seq``; a response that still comes goes to ``on_late``."""
        self._pending.pop(seq, None)
        self._expired[seq] = segment
        while len(self._expired) > EXPIRED_KEPT:
            self._expired.popitem(last=False)

    def respond(self, data: bytes) -> bool:
        """Write a response; ``False`` when the link is gone (the SMSC will ask again)."""
        if not self.writable or self._writer is None:
            return False
        self._writer.write(data)
        return True

    # -- reading -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                self._dispatch(await pdu.read_frame(self._reader))
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.close("connection closed by the SMSC")
        except pdu.PduError as exc:
            self.close(f"unreadable PDU from the SMSC: {exc}")
        except Exception as exc:  # a bug must not leave a half-open link behind
            log.exception("smpp %s: reading failed", self.settings.name)
            self.close(f"read failed: {type(exc).__name__}")

    def _dispatch(self, frame: bytes) -> None:
        head = pdu.header(frame)
        if head.is_response:
            fut = self._pending.pop(head.sequence, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(frame)
                return
            segment = self._expired.pop(head.sequence, None)
            if segment is not None and head.command_id in (pdu.SUBMIT_SM | pdu.RESP,
                                                           pdu.GENERIC_NACK):
                self._on_late(segment, frame)
            return
        if head.command_id == pdu.ENQUIRE_LINK:
            self.respond(pdu.enquire_link_resp(head.sequence))
        elif head.command_id == pdu.UNBIND:
            self.respond(pdu.unbind_resp(head.sequence))
            self.close("unbound by the SMSC")
        elif head.command_id == pdu.DELIVER_SM and self.mode != "transmitter":
            self._on_deliver(self, frame)
        else:
            self.respond(pdu.generic_nack(head.sequence, ESME_RINVCMDID))

    async def _enquire_loop(self) -> None:
        s = self.settings
        while not self.closed.is_set():
            await asyncio.sleep(s.enquire_link_s)
            try:
                await self.request(pdu.enquire_link, s.response_timeout_s)
            except TimeoutError:
                self.close(f"no enquire_link_resp within {s.response_timeout_s:g} s")
                return
            except (NotWritten, LinkLost):
                return
