"""The simulated SMSC (SMPP-6): an SMPP 3.4 server for the demo, the tests and benchmarks.

It binds ESMEs that give the right ``system_id`` and password (``ESME_RINVSYSID`` /
``ESME_RINVPASWD`` otherwise), answers ``enquire_link`` and ``unbind``, answers
``submit_sm`` with message ids and pushes ``deliver_sm`` receipts to a bound receiver
or transceiver of that ``system_id``, again and again until one answers ``ESME_ROK``.
:class:`~appliance.simulator.smsc_behaviour.SmscBehaviour` makes it misbehave the way
real SMSCs do: receipts before the ``submit_sm_resp``, duplicates, ENROUTE after
DELIVRD, throttling, hex ids answered and written in decimal in the receipt text, a
failed segment of a concatenated message, a session dropped mid-window, ``submit_sm``
never answered. It answers ``query_sm`` from what it knows (:mod:`.smsc_query`).

:class:`~appliance.simulator.smsc_stats.SmscStats` counts what came in per segment and
reads each taken segment back as a handset would (the Turkish tables too, parts joined
again), so a test can prove nothing was sent twice and the text is whole.
``drop_every`` models an SMSC that goes down after processing what reached it: the
session takes (without answering) every ``submit_sm`` already on its way, then closes;
:meth:`SmscSimulator.drop_sessions` closes at once, losing whatever was still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime

from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.simulator.smsc_query import STATE_VALUES, QueryBook
from appliance.simulator.smsc_stats import SegmentKey, SmscStats
from appliance.smpp import pdu
from appliance.smpp.deliver import split_udh
from appliance.smpp.encoding import ESM_CLASS_UDHI
from appliance.smpp.query import QUERY_SM
from appliance.smpp.status import (
    ESME_RALYBND,
    ESME_RINVBNDSTS,
    ESME_RINVCMDID,
    ESME_RINVCMDLEN,
    ESME_RINVDSTADR,
    ESME_RINVPASWD,
    ESME_RINVSYSID,
    ESME_ROK,
    ESME_RSYSERR,
)

log = logging.getLogger("appliance.simulator.smsc")

HEX_COUNTING_FROM = 0x10000000  # ids = "hex-counting": 10000000, ..., 10000009, 1000000A
DELIVER_TIMEOUT_S = 10.0
DRAIN_IDLE_S = 0.05  # a dropping session reads on until the ESME has been quiet this long


@dataclass
class _Report:
    message_id: str
    text_id: str
    destination: str  # the recipient (source_addr of the receipt)
    source: str  # the ESME's source_addr (destination_addr of the receipt)
    word: str
    submitted: datetime
    done: datetime
    excerpt: bytes
    mo: bool = False  # an inbound message, not a receipt


class _Esme:
    """One ESME connection."""

    def __init__(self, smsc: SmscSimulator, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.smsc = smsc
        self.reader = reader
        self.writer = writer
        self.mode = ""  # transmitter | receiver | transceiver once bound
        self.outstanding = 0
        self.sequence = 0
        self.pending: dict[int, asyncio.Future[int]] = {}
        self.closed = False
        self.dropping = False  # taking what is on its way, answering nothing, then closing

    @property
    def receives(self) -> bool:
        return self.mode in ("receiver", "transceiver") and not self.closed \
            and not self.dropping

    def write(self, data: bytes) -> None:
        if not self.closed and not self.dropping and not self.writer.transport.is_closing():
            self.writer.write(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fut in self.pending.values():
            if not fut.done():
                fut.set_result(-1)
        self.pending.clear()
        self.writer.close()
        self.smsc.sessions.discard(self)

    def start_deliver(self, build: Callable[[int], bytes]) -> asyncio.Future[int]:
        self.sequence = self.sequence % 0x7FFFFFFF + 1
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending[self.sequence] = fut
        self.write(build(self.sequence))
        return fut

    async def serve(self) -> None:
        try:
            while True:
                if self.dropping:
                    try:
                        frame = await asyncio.wait_for(pdu.read_frame(self.reader),
                                                       DRAIN_IDLE_S)
                    except TimeoutError:
                        break
                else:
                    frame = await pdu.read_frame(self.reader)
                self.handle(frame)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, pdu.PduError):
            pass
        finally:
            self.close()

    def handle(self, frame: bytes) -> None:
        head = pdu.header(frame)
        stats = self.smsc.stats
        if head.is_response:
            fut = self.pending.pop(head.sequence, None)
            if fut is not None and not fut.done():
                fut.set_result(head.status)
            return
        if head.command_id in (pdu.BIND_TRANSCEIVER, pdu.BIND_TRANSMITTER, pdu.BIND_RECEIVER):
            self.bind(head, frame)
        elif head.command_id == pdu.ENQUIRE_LINK:
            stats.enquire_links += 1
            self.write(pdu.enquire_link_resp(head.sequence))
        elif head.command_id == pdu.UNBIND:
            stats.unbinds += 1
            self.write(pdu.unbind_resp(head.sequence))
            self.close()
        elif head.command_id == pdu.SUBMIT_SM:
            self.smsc.submit(self, head, frame)
        elif head.command_id == QUERY_SM:
            self.write(self.smsc.book.answer(frame, self.mode))
        else:
            self.write(pdu.generic_nack(head.sequence, ESME_RINVCMDID))

    def bind(self, head: pdu.Header, frame: bytes) -> None:
        b = self.smsc.behaviour
        try:
            req = pdu.read_bind(frame)
        except pdu.PduError:
            self.write(pdu.generic_nack(head.sequence, ESME_RSYSERR))
            return
        if req.system_id != b.system_id:
            status = ESME_RINVSYSID
        elif req.password != b.password:
            status = ESME_RINVPASWD
        elif self.mode:
            status = ESME_RALYBND
        else:
            status = ESME_ROK
        self.write(pdu.bind_resp(head.command_id, head.sequence, status, b.smsc_system_id))
        if status != ESME_ROK:
            self.smsc.stats.bind_refused += 1
            return
        self.smsc.stats.binds += 1
        self.mode = {pdu.BIND_TRANSCEIVER: "transceiver", pdu.BIND_TRANSMITTER: "transmitter",
                     pdu.BIND_RECEIVER: "receiver"}[head.command_id]
        self.smsc.bound_changed()


class SmscSimulator:
    def __init__(self, behaviour: SmscBehaviour | None = None) -> None:
        self.behaviour = (behaviour or SmscBehaviour()).check()
        self.stats = SmscStats()
        self.book = QueryBook()  # what query_sm is answered
        self.sessions: set[_Esme] = set()
        self._rng = random.Random(self.behaviour.seed)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids: set[str] = set()
        self._counter = self._rng.randrange(10**9, 2 * 10**9)
        self._issued = 0  # ids handed out (hex-counting counts from HEX_COUNTING_FROM)
        self._message_fate: dict[tuple[str, int, int], tuple[str, int]] = {}
        self._receiver_ready = asyncio.Event()
        self._stopping = False
        self.port = 0

    # -- life ----------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self._server = await asyncio.start_server(self._accept, host, port, backlog=128)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for esme in list(self.sessions):
            esme.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def serve_forever(self, host: str, port: int) -> None:
        await self.start(host, port)
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def drop_sessions(self) -> int:
        """Close every ESME connection at once (what a restarting SMSC does)."""
        n = len(self.sessions)
        for esme in list(self.sessions):
            esme.close()
        self.stats.drops += n
        return n

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        esme = _Esme(self, reader, writer)
        self.sessions.add(esme)
        self._spawn(esme.serve())

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def bound_changed(self) -> None:
        self._receiver_ready.set()

    # -- submit_sm -----------------------------------------------------------------------

    def _new_id(self) -> tuple[str, str]:
        """(id as answered, id as written in the receipt text)."""
        b = self.behaviour
        while True:
            if b.ids == "decimal":
                self._counter += self._rng.randrange(1, 50)
                mid = str(self._counter)
            elif b.ids == "hex-counting":
                mid = f"{HEX_COUNTING_FROM + self._issued:08X}"
            else:
                mid = f"{self._rng.getrandbits(32):08X}"
            self._issued += 1
            if mid not in self._ids:
                self._ids.add(mid)
                break
        text_id = f"{int(mid, 16):010d}" if b.ids == "hex-text-decimal" else mid
        return mid, text_id

    def submit(self, esme: _Esme, head: pdu.Header, frame: bytes) -> None:
        b, stats, rng = self.behaviour, self.stats, self._rng
        if esme.mode not in ("transmitter", "transceiver"):
            self._answer(esme, head.sequence, ESME_RINVBNDSTS)
            return
        try:
            sm = pdu.read_short_message(frame)
        except pdu.PduError:
            self._answer(esme, head.sequence, ESME_RINVCMDLEN)
            return
        key: SegmentKey = (sm.destination_addr, sm.short_message)
        stats.received[key] += 1
        stats.validity[key] = sm.validity_period
        stats.arrivals.append(time.monotonic())
        esme.outstanding += 1
        stats.max_outstanding = max(stats.max_outstanding, esme.outstanding)
        if esme.dropping:  # on its way when the session went down: taken, never answered
            self._take(esme, key, sm, early=False)
            esme.outstanding -= 1
            return
        if b.drop_every and stats.submits % b.drop_every == 0:
            self._take(esme, key, sm, early=False)
            esme.outstanding -= 1
            stats.drops += 1
            esme.dropping = True
            return
        if rng.random() < b.throttle_rate:
            self._answer(esme, head.sequence, b.throttle_status)
            return
        if rng.random() < b.reject_rate:
            self._answer(esme, head.sequence, ESME_RINVDSTADR)
            return
        early = rng.random() < b.early_receipts
        mid = self._take(esme, key, sm, early=early)
        if rng.random() < b.unanswered_rate:
            stats.unanswered += 1
            return
        self._answer(esme, head.sequence, ESME_ROK, mid)

    def _answer(self, esme: _Esme, seq: int, status: int, mid: str = "") -> None:
        delay = self.behaviour.resp_delay_ms / 1000

        def send() -> None:
            esme.outstanding -= 1
            self.stats.submit_statuses[status] += 1
            esme.write(pdu.submit_sm_resp(seq, status, mid))

        if delay > 0:
            asyncio.get_running_loop().call_later(delay, send)
        else:
            send()

    def _fate(self, sm: pdu.ShortMessage) -> tuple[str, bool]:
        """(final word, silent) for one segment; one fate per concatenated message."""
        b, rng = self.behaviour, self._rng
        silent = rng.random() < b.silent_rate
        _, concat = split_udh(sm.esm_class, sm.short_message)
        if concat is None or not sm.esm_class & ESM_CLASS_UDHI:
            return self._word(), silent
        ref, total, seq = concat
        msg_key = (sm.destination_addr, ref, total)
        if msg_key not in self._message_fate:
            failing = total if rng.random() < b.fail_segment_rate else 0
            self._message_fate[msg_key] = (self._word(), failing)
        word, failing = self._message_fate[msg_key]
        return ("UNDELIV" if seq == failing else word), silent

    def _word(self) -> str:
        b, rng = self.behaviour, self._rng
        if rng.random() < b.delivered_rate:
            return "DELIVRD"
        return "EXPIRED" if rng.random() < b.expired_share else "UNDELIV"

    def _take(self, esme: _Esme, key: SegmentKey, sm: pdu.ShortMessage, *, early: bool) -> str:
        b, rng, stats = self.behaviour, self._rng, self.stats
        mid, text_id = self._new_id()
        stats.accepted[key] = mid
        stats.taken[key] += 1
        stats.read(sm, packed=b.septets == "packed")
        word, silent = self._fate(sm)
        stats.finals[mid] = word
        self.book.learn(mid, word, datetime.now(UTC))
        if silent or not sm.registered_delivery & 0x01:
            stats.silent.add(mid)
            return mid
        now = datetime.now(UTC)
        payload = split_udh(sm.esm_class, sm.short_message)[0]
        report = _Report(mid, text_id, sm.destination_addr, sm.source_addr, word, now, now,
                         payload[:20])
        words: list[str] = []
        reorder = rng.random() < b.reorder_rate
        if rng.random() < b.intermediate_rate and not reorder:
            words.append("ENROUTE")
        words.append(word)
        if rng.random() < b.duplicate_rate:
            words.append(word)
        if reorder:
            words.append("ENROUTE")
        delay = rng.uniform(b.delay_min_ms, b.delay_max_ms) / 1000
        for i, w in enumerate(words):
            r = _Report(**{**report.__dict__, "word": w})
            if early and i == 0 and esme.receives:
                fut = esme.start_deliver(functools.partial(self._receipt_pdu, r=r))
                self.stats.receipts_written[mid] += 1
                self._spawn(self._follow(r, fut))
            else:
                repeat = b.repeat_delay_ms / 1000 if i else 0.0
                self._spawn(self._push(r, repeat if early else delay + i * 0.005 + repeat))
        return mid

    # -- deliver_sm ----------------------------------------------------------------------

    def _date(self, when: datetime) -> str:
        return when.strftime("%y%m%d%H%M%S" if self.behaviour.seconds_in_dates else "%y%m%d%H%M")

    def _receipt_pdu(self, seq: int, r: _Report) -> bytes:
        if r.mo:
            return pdu.deliver_sm(seq, source_addr=r.destination, destination_addr=r.source,
                                  esm_class=0, short_message=r.excerpt, data_coding=8)
        delivered = "001" if r.word == "DELIVRD" else "000"
        err = "000" if r.word in ("DELIVRD", "ENROUTE") else "001"
        text = (f"id:{r.text_id} sub:001 dlvrd:{delivered} submit date:{self._date(r.submitted)}"
                f" done date:{self._date(r.done)} stat:{r.word} err:{err} text:").encode("ascii")
        text += r.excerpt
        tlvs: tuple[pdu.Tlv, ...] = ()
        if self.behaviour.receipt_tlvs:
            tlvs = (pdu.Tlv(pdu.TLV_RECEIPTED_MESSAGE_ID, r.message_id.encode("ascii") + b"\x00"),
                    pdu.Tlv(pdu.TLV_MESSAGE_STATE, bytes((STATE_VALUES[r.word],))))
        return pdu.deliver_sm(seq, source_addr=r.destination, destination_addr=r.source,
                              esm_class=0x04, short_message=text, tlvs=tlvs)

    def _receiver(self) -> _Esme | None:
        ready = [e for e in self.sessions if e.receives]
        return self._rng.choice(ready) if ready else None

    async def _push(self, r: _Report, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        while not self._stopping:
            esme = self._receiver()
            if esme is None:
                self._receiver_ready.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._receiver_ready.wait(),
                                           self.behaviour.redeliver_ms / 1000)
                continue
            fut = esme.start_deliver(lambda seq: self._receipt_pdu(seq, r))
            if not r.mo:
                self.stats.receipts_written[r.message_id] += 1
            if await self._settled(r, fut):
                return
            await asyncio.sleep(self.behaviour.redeliver_ms / 1000)

    async def _follow(self, r: _Report, fut: asyncio.Future[int]) -> None:
        """An early receipt already written: see it answered, else deliver it again."""
        if not await self._settled(r, fut):
            await asyncio.sleep(self.behaviour.redeliver_ms / 1000)
            await self._push(r, 0.0)

    async def _settled(self, r: _Report, fut: asyncio.Future[int]) -> bool:
        try:
            status = await asyncio.wait_for(fut, DELIVER_TIMEOUT_S)
        except TimeoutError:
            return False
        if status < 0:  # the session closed first
            return False
        self.stats.deliver_statuses[status] += 1
        if status != ESME_ROK:
            return False
        if r.mo:
            self.stats.mo_acked.append(r.excerpt.decode("utf-16-be"))
        else:
            self.stats.receipts_acked.setdefault(r.message_id, []).append(r.word)
        return True

    def snapshot(self) -> dict[str, object]:
        """Everything :class:`SmscStats` holds, as JSON (segments as ``dest:hex``), and
        the ``query_sm`` asked per id."""
        return {**self.stats.snapshot(len(self.sessions)), "queries": dict(self.book.asked)}

    def send_mo(self, source: str, destination: str, text: str) -> None:
        """Deliver an inbound message (``deliver_sm``, not a receipt) in UCS-2."""
        now = datetime.now(UTC)
        self._spawn(self._push(_Report("", "", source, destination, "", now, now,
                                       text.encode("utf-16-be"), mo=True), 0.0))
