"""The simulated provider: Vonage's ``POST /sms/json`` and its signed delivery receipts.

Submissions are form posts with ``api_key``, ``api_secret``, ``from``, ``to``, ``text``,
``client-ref``, ``callback`` and ``status-report-req``. The text is split into SMS parts
as the network splits it (:func:`appliance.message_text.segments.segment`) and the answer is
Vonage's ``{"message-count": "N", "messages": [...]}`` with one entry per part, each
``"status": "0"`` and its own ``message-id``. Each part gets its own receipt (its
``messageId``, the message's ``client-ref``) at the submission's ``callback`` URL,
signed exactly as Vonage signs webhooks (the adapter's own :func:`vonage_signature`),
pushed by background tasks that retry on anything but a ``2xx``, as a real provider
does.

Test hooks (not part of Vonage): ``GET /_sim/stats`` says what was received per
client-ref and what was reported; ``POST /_sim/script`` queues exact answers for the
next submissions (``{"http": 429, "retry_after": "2"}``, ``{"http": 503}``,
``{"status": "3"}``, ``{"hang_s": 5}`` (accept, then answer late), ``{"silent": true}``
(accept, never report), ``{"refuse_part": 2, "part_status": "5"}`` (part 2 refused inside
the 200), ``{"fail_part": 3}`` (part 3's receipt says ``failed``), ``{"report_order": [2,
1]}`` (the final receipts one after the other, in that order of parts));
``POST /_sim/reset`` clears both. ``POST /_sim/inbound`` with ``{"from", "text", "to"?,
"url"?, "parts"?, "message_id"?}`` makes the simulated network deliver an inbound message:
it is pushed at once, in Vonage's inbound SMS format (signed like the receipts, in the
receipts' ``report_format``; in ``parts`` parts with ``concat-*`` fields when asked) to
``url`` or ``--inbound-url``, and the answer says what status the appliance gave.

With an SMSC simulator beside it (``appliance simulator --smpp-port``), three more:
``GET /_sim/smpp/stats`` (what the SMSC received, took, answered and delivered:
:meth:`~appliance.simulator.smsc.SmscSimulator.snapshot`), ``POST /_sim/smpp/mo`` with
``{"from", "text", "to"?}`` (an inbound ``deliver_sm``, UCS-2) and
``POST /_sim/smpp/drop`` (every session closed at once, whatever is in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from appliance.message_text.segments import segment
from appliance.outgoing_http import async_client
from appliance.providers.vonage import vonage_signature
from appliance.simulator.behaviour import Behaviour
from appliance.simulator.smsc import SmscSimulator

log = logging.getLogger("appliance.simulator")
MAX_SCRIPT = 10_000
INTERMEDIATE_WORDS = ("accepted", "buffered")


@dataclass
class RefStats:
    received: int = 0  # submissions that reached us with this client-ref
    received_ms: list[int] = field(default_factory=list)  # when each arrived (wall clock)
    accepted: int = 0  # of those, answered with status 0 for at least one part
    message_id: str = ""  # the first part's id
    message_ids: list[str] = field(default_factory=list)  # one per part taken, in order
    parts: int = 0  # parts the last accepted submission was split into
    final: str | None = None  # the message's final word: its worst part's (None: silent)
    part_finals: list[str] = field(default_factory=list)  # each reported part's final word
    reports: list[str] = field(default_factory=list)  # status words pushed, in push order
    delivered: int = 0  # receipts acknowledged with a 2xx
    final_acked: bool = False  # every part's final receipt was taken at least once
    finals_waiting: set[str] = field(default_factory=set)  # part ids whose final is not taken


@dataclass
class Receipt:
    url: str
    params: dict[str, str]
    ref: str
    final: bool = False


class Simulator:
    """One simulated provider; ``app`` is its Starlette application."""

    def __init__(self, behaviour: Behaviour | None = None,
                 smsc: SmscSimulator | None = None) -> None:
        self.behaviour = (behaviour or Behaviour()).check()
        self.smsc = smsc
        self.rng = random.Random(self.behaviour.seed)
        self.refs: dict[str, RefStats] = {}
        self.script: list[dict[str, Any]] = []
        self.duplicates_submitted = 0
        self.submissions = 0
        self.throttled = 0
        self.unknown_refs_reported = 0
        self.delivery_status: Counter[str] = Counter()
        self.reports_pushed = 0
        self.reports_acknowledged = 0
        self.reports_given_up = 0
        self.pending = 0
        self.last_report_ms = 0
        self.last_final_report_ms = 0  # when the last ref's first final receipt was taken
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle: asyncio.Queue[httpx.AsyncClient] | None = None
        self._clients: list[httpx.AsyncClient] = []
        self.app = Starlette(routes=[
            Route("/sms/json", self.submit, methods=["POST"]),
            Route("/_sim/stats", self.stats, methods=["GET"]),
            Route("/_sim/script", self.set_script, methods=["POST"]),
            Route("/_sim/reset", self.reset, methods=["POST"]),
            Route("/_sim/inbound", self.inbound, methods=["POST"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            *([Route("/_sim/smpp/stats", self.smsc_stats, methods=["GET"]),
               Route("/_sim/smpp/mo", self.smsc_mo, methods=["POST"]),
               Route("/_sim/smpp/drop", self.smsc_drop, methods=["POST"])]
              if smsc is not None else []),
        ], lifespan=self._lifespan)

    # -- plumbing ----------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.close()

    def idle_clients(self) -> asyncio.Queue[httpx.AsyncClient]:
        """One-connection clients for pushing receipts; taking one is taking a slot."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(max(1, self.behaviour.report_concurrency)):
                client = async_client(
                    timeout=10.0,
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
                self._clients.append(client)
                self._idle.put_nowait(client)
        return self._idle

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        self._idle = None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- submissions -------------------------------------------------------------------
    async def submit(self, request: Request) -> Response:
        b = self.behaviour
        form = await request.form()
        params = {k: v for k, v in form.items() if isinstance(v, str)}
        self.submissions += 1
        ref = params.get("client-ref", "")
        to = params.get("to", "")
        stats = self.refs.setdefault(ref, RefStats()) if ref else RefStats()
        stats.received += 1
        stats.received_ms.append(time.time_ns() // 1_000_000)
        if params.get("api_key") != b.api_key or params.get("api_secret") != b.api_secret:
            return _answer(to, ref, "4", error="Bad Credentials")
        if not to or not params.get("text") or not params.get("from"):
            return _answer(to, ref, "2", error="Missing to, from or text")
        step = self.script.pop(0) if self.script else None
        if step is not None:
            scripted = await self._scripted(step, to, ref)
            if scripted is not None:
                return scripted
        elif b.throttle_rate and self.rng.random() < b.throttle_rate:
            self.throttled += 1
            if self.rng.random() < 0.5:
                return JSONResponse({"error": "Too Many Requests"}, status_code=429,
                                    headers={"Retry-After": f"{b.retry_after_s:g}"})
            return _answer(to, ref, "1", error="Throughput Rate Exceeded")
        # Split as the network does (Vonage counts the same way): one entry, one id and
        # one receipt per part. A scripted "refuse_part" refuses that part inside the 200.
        count = segment(params.get("text", "")).count
        refused = int(step.get("refuse_part", 0)) if step is not None else 0
        entries: list[dict[str, str]] = []
        taken: list[tuple[int, str]] = []
        for part in range(1, count + 1):
            if part == refused:
                entries.append(_entry(to, ref, str(step.get("part_status", "5")) if step else "5",
                                      error="scripted part refusal"))
                continue
            message_id = secrets.token_hex(8).upper()
            taken.append((part, message_id))
            entries.append(_entry(to, ref, "0", message_id=message_id))
        if taken:
            if stats.accepted:
                self.duplicates_submitted += 1
            stats.accepted += 1
        stats.parts = count
        stats.message_ids = [m for _, m in taken]
        stats.message_id = stats.message_ids[0] if taken else ""
        callback = params.get("callback") or b.callback_url
        silent = step is not None and bool(step.get("silent"))
        if callback and params.get("status-report-req", "1") != "0" and not silent and taken:
            await self._report(callback, to, ref, taken, stats, step or {})
        if step is not None and "hang_s" in step:
            await asyncio.sleep(float(step["hang_s"]))
        return JSONResponse({"message-count": str(count), "messages": entries})

    async def _scripted(self, step: dict[str, Any], to: str, ref: str) -> Response | None:
        """A scripted answer, or None to accept (``hang_s`` accepts, then stalls)."""
        if "http" in step:
            headers = {}
            if "retry_after" in step:
                headers["Retry-After"] = str(step["retry_after"])
            return JSONResponse({"error": f"scripted {step['http']}"},
                                status_code=int(step["http"]), headers=headers)
        if "status" in step:
            return _answer(to, ref, str(step["status"]), error="scripted")
        return None

    # -- receipts ----------------------------------------------------------------------
    def _final_word(self) -> str:
        b = self.behaviour
        if self.rng.random() < b.delivered_rate:
            return "delivered"
        return "expired" if self.rng.random() < b.expired_share else "failed"

    async def _report(self, url: str, to: str, ref: str, taken: list[tuple[int, str]],
                      stats: RefStats, step: dict[str, Any]) -> None:
        """Receipts for every part taken, each under its part's id, with the client-ref.

        The parts of one message share its fate (the final word), except one part that
        fails on its own: at ``part_fail_rate``, or the scripted ``fail_part``. A scripted
        ``report_order`` (part numbers) pushes the final receipts one after the other
        in that order, each once the previous was taken.
        """
        b = self.behaviour
        rng = self.rng
        if b.unknown_ref_rate and rng.random() < b.unknown_ref_rate:
            self.unknown_refs_reported += 1
            ghost = "GHOST" + secrets.token_hex(8).upper()
            self._later(Receipt(url, self._receipt(to, ghost, secrets.token_hex(8).upper(),
                                                   self._final_word(), time.time()), ghost),
                        self._delay_s())
        if b.silent_rate and rng.random() < b.silent_rate:
            return
        word = self._final_word()
        failing = int(step.get("fail_part", 0))
        if not failing and len(taken) > 1 and b.part_fail_rate \
                and rng.random() < b.part_fail_rate:
            failing = rng.choice(taken)[0]
        finals = {part: ("failed" if part == failing else word) for part, _ in taken}
        stats.part_finals = [finals[part] for part, _ in taken]
        stats.final = next((w for w in ("failed", "expired") if w in finals.values()), word)
        stats.finals_waiting = {message_id for _, message_id in taken}
        stats.final_acked = False
        sent_at = time.time()
        final_at = sent_at + 1 + (b.delay_max_ms / 1000)
        now: list[Receipt] = []
        later: list[Receipt] = []
        in_order: list[Receipt] = []
        order = step.get("report_order")
        for part, message_id in taken:
            if b.intermediate_rate and rng.random() < b.intermediate_rate:
                now.append(Receipt(url, self._receipt(to, ref, message_id, "accepted", sent_at),
                                   ref))
            final_receipt = Receipt(url, self._receipt(to, ref, message_id, finals[part],
                                                       final_at), ref, final=True)
            if isinstance(order, list):
                in_order.append(final_receipt)
            else:
                now.append(final_receipt)
            if b.reorder_rate and rng.random() < b.reorder_rate:
                word_then = rng.choice(INTERMEDIATE_WORDS)
                later.append(Receipt(url, self._receipt(to, ref, message_id, word_then, sent_at),
                                     ref))
            if b.duplicate_rate and rng.random() < b.duplicate_rate:
                later.append(final_receipt)  # the very same receipt, pushed again
        if isinstance(order, list):
            ids = dict(taken)
            wanted = [ids[int(p)] for p in order if int(p) in ids]
            wanted += [m for _, m in taken if m not in wanted]
            in_order.sort(key=lambda r: wanted.index(r.params["messageId"]))
        for receipt in now + in_order + later:
            stats.reports.append(receipt.params["status"])
        if in_order:
            self._in_sequence(in_order, self._delay_s())
        if b.early_reports and rng.random() < b.early_reports:
            for receipt in now:
                # Pushed before the submission is answered, once: a receipt that does
                # not get through is retried in the background (as a provider's
                # webhook queue does), so the submission's answer never waits on it.
                if not await self._push(receipt, inline=True, tries=1):
                    self._later(receipt, 0.2)
        else:
            delay = self._delay_s()
            for i, receipt in enumerate(now):
                self._later(receipt, delay + i * 0.01)
        base = self._delay_s()
        for i, receipt in enumerate(later):
            self._later(receipt, base + 0.05 * (i + 1))

    def _in_sequence(self, receipts: list[Receipt], delay_s: float) -> None:
        """Push ``receipts`` one after the other, each once the previous was taken."""
        self.pending += len(receipts)

        async def run() -> None:
            await asyncio.sleep(delay_s)
            for receipt in receipts:
                await self._push(receipt, inline=False, counted=True)

        self._spawn(run())

    def _delay_s(self) -> float:
        b = self.behaviour
        return self.rng.uniform(b.delay_min_ms, b.delay_max_ms) / 1000

    def _receipt(self, to: str, ref: str, message_id: str, status: str,
                 at_s: float) -> dict[str, str]:
        b = self.behaviour
        when = datetime.fromtimestamp(at_s, tz=UTC)
        params = {
            "msisdn": to,
            "to": "APPLIANCE",
            "network-code": "28601",
            "messageId": message_id,
            "price": "0.03330000",
            "status": status,
            "scts": when.strftime("%y%m%d%H%M"),
            "err-code": "0" if status in ("delivered", "accepted", "buffered") else "1",
            "api-key": b.api_key,
            "client-ref": ref,
            "message-timestamp": when.strftime("%Y-%m-%d %H:%M:%S"),
            "timestamp": str(int(time.time())),
            "nonce": secrets.token_hex(16),
        }
        if b.signature_secret:
            params["sig"] = vonage_signature(params, b.signature_secret, b.signature_method)
        return params

    def _later(self, receipt: Receipt, delay_s: float) -> None:
        self.pending += 1

        async def run() -> None:
            await asyncio.sleep(delay_s)
            await self._push(receipt, inline=False, counted=True)

        self._spawn(run())

    async def _push(self, receipt: Receipt, inline: bool, counted: bool = False,
                    tries: int | None = None) -> bool:
        """Deliver one receipt, retrying on errors and non-2xx answers (``tries`` times,
        default ``report_retries``); whether it was taken."""
        if inline and not counted:
            self.pending += 1
        b = self.behaviour
        idle = self.idle_clients()
        delay = 0.2
        attempts = max(1, b.report_retries if tries is None else tries)
        try:
            for attempt in range(attempts):
                self.reports_pushed += 1
                client = await idle.get()
                try:
                    resp = await self._send(client, receipt)
                    code = str(resp.status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                finally:
                    idle.put_nowait(client)
                self.delivery_status[code] += 1
                if code.startswith("2"):
                    self.reports_acknowledged += 1
                    self.last_report_ms = time.time_ns() // 1_000_000
                    stats = self.refs.get(receipt.ref)
                    if stats is not None:
                        stats.delivered += 1
                        if receipt.final:
                            stats.finals_waiting.discard(receipt.params["messageId"])
                            if not stats.finals_waiting and not stats.final_acked:
                                stats.final_acked = True
                                self.last_final_report_ms = self.last_report_ms
                    return True
                if attempt + 1 < attempts:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            if tries is None:
                self.reports_given_up += 1
            return False
        finally:
            self.pending -= 1

    async def _send(self, client: httpx.AsyncClient, receipt: Receipt) -> httpx.Response:
        fmt = self.behaviour.report_format
        if fmt == "json":
            return await client.post(receipt.url, content=json.dumps(receipt.params),
                                     headers={"Content-Type": "application/json"})
        if fmt == "get":
            return await client.get(receipt.url, params=receipt.params)
        return await client.post(receipt.url, data=receipt.params)

    # -- test hooks --------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {
            "submissions": self.submissions,
            "duplicates_submitted": self.duplicates_submitted,
            "throttled": self.throttled,
            "reports_pushed": self.reports_pushed,
            "reports_acknowledged": self.reports_acknowledged,
            "reports_given_up": self.reports_given_up,
            "unknown_refs_reported": self.unknown_refs_reported,
            "pending_reports": self.pending,
            "last_report_ms": self.last_report_ms,
            "last_final_report_ms": self.last_final_report_ms,
            "delivery_status": dict(self.delivery_status),
            "refs": {
                ref: {"received": s.received, "received_ms": s.received_ms,
                      "accepted": s.accepted,
                      "message_id": s.message_id, "message_ids": s.message_ids,
                      "parts": s.parts, "final": s.final, "part_finals": s.part_finals,
                      "reports": s.reports, "delivered": s.delivered}
                for ref, s in self.refs.items()
            },
        }

    async def stats(self, request: Request) -> Response:
        return JSONResponse(self.snapshot())

    async def set_script(self, request: Request) -> Response:
        try:
            steps = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        if not isinstance(steps, list) or len(steps) > MAX_SCRIPT or not all(
                isinstance(s, dict) for s in steps):
            return JSONResponse({"error": "want a JSON list of objects"}, status_code=400)
        self.script.extend(steps)
        return JSONResponse({"queued": len(self.script)})

    def inbound_params(self, sender: str, to: str, text: str, message_id: str,
                       concat: tuple[str, int, int] | None = None) -> dict[str, str]:
        """One inbound SMS (or one part of one) as Vonage's inbound webhook sends it."""
        b = self.behaviour
        now = datetime.now(tz=UTC)
        words = text.split()
        params = {
            "msisdn": sender.removeprefix("+"),
            "to": to,
            "messageId": message_id,
            "text": text,
            "type": "text" if text.isascii() else "unicode",
            "keyword": words[0].upper() if words else "",
            "api-key": b.api_key,
            "message-timestamp": now.strftime("%Y-%m-%d %H:%M:%S"),
            "timestamp": str(int(now.timestamp())),
            "nonce": secrets.token_hex(16),
        }
        if concat is not None:
            ref, part, total = concat
            params.update({"concat": "true", "concat-ref": ref, "concat-part": str(part),
                           "concat-total": str(total)})
        if b.signature_secret:
            params["sig"] = vonage_signature(params, b.signature_secret, b.signature_method)
        return params

    async def inbound(self, request: Request) -> Response:
        try:
            data = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        if not isinstance(data, dict) or not isinstance(data.get("from"), str) \
                or not isinstance(data.get("text"), str):
            return JSONResponse({"error": 'want {"from", "text", "to"?, "url"?, "parts"?}'},
                                status_code=400)
        url = data.get("url") or self.behaviour.inbound_url
        parts = data.get("parts", 1)
        if not isinstance(url, str) or not url:
            return JSONResponse({"error": "no url given and no --inbound-url"}, status_code=400)
        if not isinstance(parts, int) or not 1 <= parts <= 10:
            return JSONResponse({"error": "parts is 1 to 10"}, status_code=400)
        text: str = data["text"]
        to = str(data.get("to") or "APPLIANCE")
        message_id = str(data.get("message_id") or secrets.token_hex(8).upper())
        size = max(1, -(-len(text) // parts))
        pieces = [text[i * size:(i + 1) * size] for i in range(parts)] if parts > 1 else [text]
        ref = secrets.token_hex(2).upper()
        statuses: list[int | str] = []
        client = await self.idle_clients().get()
        try:
            for i, piece in enumerate(pieces, start=1):
                concat = (ref, i, parts) if parts > 1 else None
                part_id = message_id if parts == 1 else f"{message_id}-{i}"
                params = self.inbound_params(data["from"], to, piece, part_id, concat)
                try:
                    resp = await self._send(client, Receipt(url, params, ""))
                    statuses.append(resp.status_code)
                except httpx.HTTPError as exc:
                    statuses.append(type(exc).__name__)
        finally:
            self.idle_clients().put_nowait(client)
        return JSONResponse({"messageId": message_id, "statuses": statuses})

    async def reset(self, request: Request) -> Response:
        self.script.clear()
        self.refs.clear()
        self.duplicates_submitted = self.submissions = self.throttled = 0
        return JSONResponse({"reset": True})

    async def smsc_stats(self, request: Request) -> Response:
        assert self.smsc is not None
        return JSONResponse(self.smsc.snapshot())

    async def smsc_mo(self, request: Request) -> Response:
        assert self.smsc is not None
        try:
            data = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        if not isinstance(data, dict) or not isinstance(data.get("from"), str) \
                or not isinstance(data.get("text"), str):
            return JSONResponse({"error": 'want {"from", "text", "to"?}'}, status_code=400)
        self.smsc.send_mo(data["from"].removeprefix("+"), str(data.get("to") or "ACME"),
                          data["text"])
        return JSONResponse({"queued": True})

    async def smsc_drop(self, request: Request) -> Response:
        assert self.smsc is not None
        return JSONResponse({"dropped": self.smsc.drop_sessions()})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "simulator": True})


def _entry(to: str, ref: str, status: str, message_id: str = "",
           error: str = "") -> dict[str, str]:
    """One ``messages[]`` entry of Vonage's answer: one SMS part."""
    part: dict[str, str] = {"to": to, "status": status}
    if ref:
        part["client-ref"] = ref
    if status == "0":
        part.update({"message-id": message_id, "remaining-balance": "100.00000000",
                     "message-price": "0.03330000", "network": "28601"})
    else:
        part["error-text"] = error
    return part


def _answer(to: str, ref: str, status: str, message_id: str = "",
            error: str = "") -> Response:
    return JSONResponse({"message-count": "1",
                         "messages": [_entry(to, ref, status, message_id, error)]})
