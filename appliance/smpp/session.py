"""One persistent ESME session per provider (SMPP-1), and submission through it (SMPP-2).

``bind = "transceiver"`` keeps one link; ``"transmitter+receiver"`` keeps two, each
reconnected on its own. A lost link is opened again after a pause that doubles from
``reconnect_min_s`` up to ``reconnect_max_s`` (60 s) and resets after a bind; every
change (bound, lost, bind refused, cannot connect) is one log line.

:meth:`SmppSession.submit` writes one ``submit_sm`` per segment, at most ``window``
unanswered at a time and no faster than the provider's token bucket; it never writes a
segment twice. Throttling answers halve the rate in force (the bucket's, or what
actually went out over the last second when that was less; at most once a second, down
to 1/32 of the configured rate); answers without throttling bring it back by a quarter
a second.

Each ``deliver_sm`` goes to ``on_deliver`` (see :mod:`appliance.smpp.deliver`); the
session answers ``ESME_ROK`` only once it returned ``True``, and ``ESME_RX_T_APPN``
(temporary: the SMSC delivers it again) when it returned ``False`` or raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from appliance.clock import Clock
from appliance.providers.base import SubmitResult
from appliance.rate import TokenBucket
from appliance.smpp import pdu
from appliance.smpp.deliver import DeliverHandler, read_deliver
from appliance.smpp.ids import IdEvidence, IdReader
from appliance.smpp.link import BindRefused, Link, LinkLost, LinkMode, NotWritten
from appliance.smpp.settings import SmppSettings
from appliance.smpp.state import LinkState, SessionState
from appliance.smpp.status import ESME_ROK, ESME_RX_T_APPN, RETRY_STATUSES, status_name
from appliance.smpp.submission import LateResponse, Segment, SegmentOutcome

log = logging.getLogger("appliance.smpp")

THROTTLE_RETRY_AFTER_S = 1.0
NOT_BOUND = "not sent: not bound"  # no session to the SMSC: the provider is not reached
RATE_STEP_S = 1.0  # at most one rate change a second
RATE_FLOOR_SHARE = 1 / 32
LateHandler = Callable[[LateResponse], Awaitable[None]]


class SmppSession:
    def __init__(
        self,
        settings: SmppSettings,
        on_deliver: DeliverHandler,
        *,
        on_late_response: LateHandler | None = None,
        id_evidence: IdEvidence | None = None,
        now_ms: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.ids = IdReader(settings.receipt_id_format, id_evidence)
        self._on_deliver = on_deliver
        self._on_late_response = on_late_response
        self._now_ms = now_ms or Clock.from_env().now_ms
        self._clock = clock
        self._source = settings.source()
        self._bucket = TokenBucket(settings.rate_per_s, clock=clock)
        self._rate_floor = max(settings.rate_per_s * RATE_FLOOR_SHARE, 0.1)
        self._rate_changed_at = -RATE_STEP_S
        self._window = asyncio.Semaphore(settings.window)
        self._modes: tuple[LinkMode, ...] = (
            ("transceiver",) if settings.bind == "transceiver" else ("transmitter", "receiver"))
        self._links: dict[LinkMode, Link] = {}
        self._errors: dict[LinkMode, str] = {}
        self._bound_changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._stopping: asyncio.Future[None] | None = None
        self._supervisors: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._outstanding = 0
        self._written: deque[float] = deque()  # when each submit_sm of the last second went
        self.throttled = self.reconnects = self.submitted = 0
        self.accepted = self.rejected = self.retried = self.uncertain = 0
        self.delivers = self.deliver_temp_errors = 0

    # -- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start binding in the background (returns at once; see :meth:`wait_bound`)."""
        if self._supervisors:
            return
        for mode in self._modes:
            self._supervisors.append(asyncio.create_task(self._supervise(mode),
                                                         name=f"smpp-{self.name}-{mode}"))

    async def wait_bound(self, timeout_s: float) -> bool:
        """``True`` once every link is bound; ``False`` after ``timeout_s`` or at stop."""
        deadline = self._clock() + timeout_s
        while not self.is_bound:
            left = deadline - self._clock()
            if left <= 0 or self._stop.is_set():
                return False
            self._bound_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._bound_changed.wait(), left)
        return True

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop: new segments are RETRY at once, answers still due get ``timeout_s`` to
        arrive, callbacks in progress finish and are answered, then ``unbind``. A second
        call waits for the first to finish."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_now(timeout_s))
        await asyncio.shield(self._stopping)

    async def _stop_now(self, timeout_s: float) -> None:
        self._stop.set()
        self._signal()
        deadline = self._clock() + timeout_s
        while self._outstanding and self._clock() < deadline:
            await asyncio.sleep(0.01)
        if self._background:
            await asyncio.wait(set(self._background),
                               timeout=max(0.1, deadline - self._clock()))
        for link in list(self._links.values()):
            if link.bound:
                await link.unbind(min(2.0, max(0.1, deadline - self._clock())))
            link.close("stopped")
        for task in self._supervisors:
            task.cancel()
        await asyncio.gather(*self._supervisors, return_exceptions=True)
        log.info("smpp %s: stopped", self.name)

    @property
    def is_bound(self) -> bool:
        return all((link := self._links.get(m)) is not None and link.bound for m in self._modes)

    def _signal(self) -> None:
        self._bound_changed.set()

    async def _supervise(self, mode: LinkMode) -> None:
        s = self.settings
        delay = s.reconnect_min_s
        where = f"{s.host}:{s.port}"
        while not self._stop.is_set():
            link = Link(s, mode, on_deliver=self._deliver_received, on_late=self._late,
                        now_ms=self._now_ms)
            self._links[mode] = link
            try:
                await link.open()
            except BindRefused as exc:
                self._errors[mode] = f"bind refused: {exc}"
                log.warning("smpp %s: %s bind refused by %s: %s; retrying in %.1f s",
                            self.name, mode, where, exc, delay)
            except (OSError, TimeoutError, LinkLost, NotWritten, pdu.PduError) as exc:
                self._errors[mode] = f"cannot bind: {type(exc).__name__}: {exc}"
                log.warning("smpp %s: cannot %s-bind to %s (%s: %s); retrying in %.1f s",
                            self.name, mode, where, type(exc).__name__, exc, delay)
            except Exception as exc:  # e.g. a bind PDU that cannot be built: keep trying
                self._errors[mode] = f"cannot bind: {type(exc).__name__}: {exc}"
                log.exception("smpp %s: %s bind failed; retrying in %.1f s", self.name, mode,
                              delay)
            else:
                self._errors.pop(mode, None)
                delay = s.reconnect_min_s
                log.info("smpp %s: bound %s to %s as %s (SMSC %s)", self.name, mode, where,
                         s.system_id, link.smsc_system_id or "?")
                self._signal()
                await link.closed.wait()
                self._signal()
                if self._stop.is_set():
                    return
                self.reconnects += 1
                self._errors[mode] = link.close_reason
                log.warning("smpp %s: %s session lost (%s); reconnecting in %.1f s",
                            self.name, mode, link.close_reason, delay)
            link.close("not bound")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, s.reconnect_max_s)

    # -- submission ----------------------------------------------------------------------

    async def submit(self, segments: Sequence[Segment]) -> list[SegmentOutcome]:
        """One outcome per segment, in order (see :mod:`appliance.smpp.submission`)."""
        if len(segments) == 1:  # most messages: no task of its own
            return [await self._submit_one(segments[0])]
        return list(await asyncio.gather(*(self._submit_one(seg) for seg in segments)))

    def _tx_link(self) -> Link | None:
        link = self._links.get("transceiver" if "transceiver" in self._modes else "transmitter")
        return link if link is not None and link.bound else None

    def _retry(self, seg: Segment, why: str, *, written: bool = False,
               status: int | None = None) -> SegmentOutcome:
        self.retried += 1
        return SegmentOutcome(
            seg.ref, seg.part, SubmitResult.RETRY, written=written, command_status=status,
            status_name=None if status is None else status_name(status),
            retry_after_s=None if status is None else THROTTLE_RETRY_AFTER_S, error=why)

    def _uncertain(self, seg: Segment, why: str) -> SegmentOutcome:
        self.uncertain += 1
        return SegmentOutcome(seg.ref, seg.part, SubmitResult.UNCERTAIN, written=True,
                              error=why)

    async def _submit_one(self, seg: Segment) -> SegmentOutcome:
        if self._stop.is_set():
            return self._retry(seg, "not sent: session stopping")
        if self._tx_link() is None and not await self.wait_bound(self.settings.bound_wait_s):
            return self._retry(seg, NOT_BOUND)
        async with self._window:
            try:
                return await self._write_and_wait(seg)
            except Exception:  # a bug here must not lose the outcome of a written PDU
                log.exception("smpp %s: submitting %s part %d failed", self.name, seg.ref,
                              seg.part)
                return self._uncertain(seg, "internal error while submitting")

    async def _write_and_wait(self, seg: Segment) -> SegmentOutcome:
        if self._stop.is_set():
            return self._retry(seg, "not sent: session stopping")
        wait = self._bucket.reserve()
        if wait > 0:  # the rate's turn; a stop ends the wait (the segment is then RETRY)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)
        link = self._tx_link()
        if link is None or self._stop.is_set():
            return self._retry(seg, "not sent: session lost before writing")
        s = self.settings

        def build(seq: int) -> bytes:
            return pdu.submit_sm(
                seq, source_addr=seg.source.addr, source_ton=seg.source.ton,
                source_npi=seg.source.npi, destination_addr=seg.destination.addr,
                dest_ton=seg.destination.ton, dest_npi=seg.destination.npi,
                esm_class=seg.esm_class, registered_delivery=seg.registered_delivery,
                data_coding=seg.data_coding, short_message=seg.short_message,
                validity_period=seg.validity_period)

        try:
            seq, fut = link.send_request(build)
        except NotWritten as exc:
            return self._retry(seg, f"not sent: {exc}")
        except ValueError as exc:  # a segment no SMSC could take: it can never go
            self.rejected += 1
            return SegmentOutcome(seg.ref, seg.part, SubmitResult.REJECTED, written=False,
                                  error=f"cannot encode submit_sm: {exc}")
        self.submitted += 1
        self._outstanding += 1
        now = self._clock()
        self._written.append(now)
        self._sent_last_second(now)
        try:
            await link.drain()
            resp = await asyncio.wait_for(fut, s.response_timeout_s)
        except LinkLost as exc:
            return self._uncertain(seg, f"session lost before submit_sm_resp: {exc}")
        except TimeoutError:
            link.expire(seq, seg)
            return self._uncertain(seg, f"no submit_sm_resp within {s.response_timeout_s:g} s")
        except (ConnectionError, OSError) as exc:
            return self._uncertain(seg, f"write failed: {type(exc).__name__}")
        finally:
            self._outstanding -= 1
        return self._outcome(seg, resp)

    def _outcome(self, seg: Segment, resp: bytes) -> SegmentOutcome:
        head = pdu.header(resp)
        if head.command_id not in (pdu.SUBMIT_SM | pdu.RESP, pdu.GENERIC_NACK):
            return self._uncertain(seg, f"answered with command 0x{head.command_id:08X}")
        name = status_name(head.status)
        if head.status == ESME_ROK and head.command_id == pdu.GENERIC_NACK:
            return self._uncertain(seg, "generic_nack with ESME_ROK")
        if head.status == ESME_ROK:
            self.accepted += 1
            self._speed_up()
            message_id = pdu.read_message_id(resp) or None
            return SegmentOutcome(
                seg.ref, seg.part, SubmitResult.ACCEPTED, written=True, message_id=message_id,
                id_key=self.ids.submit_key(message_id) if message_id else None,
                command_status=head.status, status_name=name,
                error=None if message_id else "accepted without a message_id")
        if head.status in RETRY_STATUSES:
            self.throttled += 1
            self._slow_down()
            return self._retry(seg, f"smpp {name}", written=True, status=head.status)
        self.rejected += 1
        return SegmentOutcome(seg.ref, seg.part, SubmitResult.REJECTED, written=True,
                              command_status=head.status, status_name=name,
                              error=f"smpp {name}")

    async def ask(self, build: Callable[[int], bytes]) -> bytes:
        """One request that is not a submission (``query_sm``) on the transmitting link,
        in the same window and at the same rate as ``submit_sm``; its answer as it came.

        :class:`NotWritten` when nothing was written (not bound, stopping, a PDU that
        cannot be built: ``ValueError``); ``LinkLost`` or ``TimeoutError`` when it was
        written and no answer came within ``response_timeout_s``.
        """
        if self._stop.is_set() or self._tx_link() is None:
            raise NotWritten("not bound" if not self._stop.is_set() else "stopping")
        async with self._window:
            wait = self._bucket.reserve()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), wait)
            link = self._tx_link()
            if link is None or self._stop.is_set():
                raise NotWritten("session lost before writing")
            self._outstanding += 1
            try:
                answer = await link.request(build, self.settings.response_timeout_s)
            finally:
                self._outstanding -= 1
        if pdu.header(answer).status in RETRY_STATUSES:
            self.throttled += 1
            self._slow_down()
        return answer

    def _sent_last_second(self, now: float) -> int:
        while self._written and now - self._written[0] > 1.0:
            self._written.popleft()
        return len(self._written)

    def _sent_rate(self, now: float) -> float:
        """submit_sm per second actually written lately (over at most the last second)."""
        n = self._sent_last_second(now)
        if not n:
            return 0.0
        return n / max(now - self._written[0], 0.25)

    def _slow_down(self) -> None:
        now = self._clock()
        if now - self._rate_changed_at >= RATE_STEP_S:
            old = self._bucket.rate
            # Halve what actually went out, when that was below the bucket's rate (a
            # high rate_per_s the SMSC never let us reach).
            base = min(old, max(self._sent_rate(now), self._rate_floor))
            self._bucket.rate = max(self._rate_floor, base / 2)
            self._rate_changed_at = now
            if self._bucket.rate != old:
                log.info("smpp %s: throttled; rate %.3g/s -> %.3g/s", self.name, old,
                         self._bucket.rate)

    def _speed_up(self) -> None:
        target = self.settings.rate_per_s
        if self._bucket.rate >= target:
            return
        now = self._clock()
        if now - self._rate_changed_at >= RATE_STEP_S:
            self._bucket.rate = min(target, self._bucket.rate * 1.25)
            self._rate_changed_at = now

    def _late(self, seg: Segment, resp: bytes) -> None:
        head = pdu.header(resp)
        message_id = pdu.read_message_id(resp) or None if head.status == ESME_ROK else None
        late = LateResponse(seg.ref, seg.part, head.status, status_name(head.status), message_id,
                            self.ids.submit_key(message_id) if message_id else None)
        log.info("smpp %s: late submit_sm_resp for %s part %d: %s %s", self.name, seg.ref,
                 seg.part, late.status_name, message_id or "")
        if self._on_late_response is not None:
            self._spawn(self._on_late_response(late))

    # -- deliver_sm ----------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _deliver_received(self, link: Link, frame: bytes) -> None:
        self.delivers += 1
        self._spawn(self._deliver(link, frame))

    async def _deliver(self, link: Link, frame: bytes) -> None:
        info = read_deliver(self.name, frame, self.ids, self._now_ms())
        try:
            stored = await self._on_deliver(info) is True
        except Exception:
            log.exception("smpp %s: storing deliver_sm %d failed", self.name, info.sequence)
            stored = False
        if not stored:
            self.deliver_temp_errors += 1
        status = ESME_ROK if stored else ESME_RX_T_APPN
        if not link.respond(pdu.deliver_sm_resp(info.sequence, status)):
            log.info("smpp %s: deliver_sm %d not answered (session gone); the SMSC will"
                     " deliver it again", self.name, info.sequence)

    # -- state ---------------------------------------------------------------------------

    def state(self) -> SessionState:
        links = []
        for mode in self._modes:
            link = self._links.get(mode)
            links.append(LinkState(
                mode=mode, bound=bool(link and link.bound),
                bound_since_ms=link.bound_at_ms if link and link.bound else None,
                smsc_system_id=link.smsc_system_id if link else "",
                last_error=self._errors.get(mode)))
        since = [ls.bound_since_ms for ls in links if ls.bound_since_ms is not None]
        bound = all(ls.bound for ls in links)
        return SessionState(
            provider=self.name, bound=bound,
            bound_since_ms=max(since) if bound and since else None,
            window=self.settings.window, window_in_use=self._outstanding,
            rate_per_s=self._bucket.rate, throttled=self.throttled,
            reconnects=self.reconnects, submitted=self.submitted, accepted=self.accepted,
            rejected=self.rejected, retried=self.retried, uncertain=self.uncertain,
            delivers=self.delivers, deliver_temp_errors=self.deliver_temp_errors,
            links=tuple(links))
