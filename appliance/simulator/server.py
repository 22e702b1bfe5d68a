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
1]}`` (the final receipts one after the other, in that order of parts), ``{"push":
false}`` (the receipts held until ``POST /_sim/push_now`` or a status request));
``POST /_sim/reset`` clears both. ``GET /sms/status`` answers status requests
(:mod:`appliance.simulator.status_pull`, with its own ``POST /_sim/pull_script``);
``push_rate`` below 1 leaves that share of messages to be found only that way.
``POST /_sim/account`` with ``{"credit": N}`` sets
the balance that Vonage's ``GET /account/get-balance`` answers (at 0 or less every
submission is answered status 9, Partner Quota Violation, until it is set above), and
``{"refuse": "15"}`` answers every submission that status until ``{"refuse": null}``.
``POST /_sim/inbound`` with ``{"from", "text", "to"?,
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
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from appliance.message_text.segments import segment
from appliance.simulator.account import SimAccount
from appliance.simulator.behaviour import Behaviour
from appliance.simulator.receipts import Receipt, ReceiptPush, RefStats
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.status_pull import StatusDesk
from appliance.simulator.vonage_format import answer as _answer
from appliance.simulator.vonage_format import entry as _entry
from appliance.simulator.vonage_format import inbound_params, receipt_params

log = logging.getLogger("appliance.simulator")
MAX_SCRIPT = 10_000
INTERMEDIATE_WORDS = ("accepted", "buffered")


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
        self.account = SimAccount(self.behaviour)
        self.requests = 0  # HTTP requests to the submission endpoints
        self.batch_requests = 0
        self.batch_sizes: list[int] = []
        self.receipts = ReceiptPush(self.behaviour, self.refs)
        self.status_desk = StatusDesk(self.behaviour, self.refs, self.receipts)
        self.app = Starlette(routes=[
            Route("/sms/json", self.submit, methods=["POST"]),
            Route("/sms/status", self.status_desk.status, methods=["GET"]),
            Route("/_sim/pull_script", self.status_desk.set_script, methods=["POST"]),
            Route("/_sim/push_now", self.status_desk.push_now, methods=["POST"]),
            Route("/sms/batch", self.submit_batch, methods=["POST"]),
            Route("/account/get-balance", self.account.balance, methods=["GET"]),
            Route("/_sim/account", self.account.set, methods=["POST"]),
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

    async def close(self) -> None:
        await self.receipts.close()

    # -- submissions -------------------------------------------------------------------
    async def submit(self, request: Request) -> Response:
        form = await request.form()
        self.requests += 1
        return await self._submit({k: v for k, v in form.items() if isinstance(v, str)})

    async def submit_batch(self, request: Request) -> Response:
        """Many numbers, one text, in one request (not Vonage's: the simulator's own, for
        the kinds that take many): a JSON object of the single submission's fields with
        ``messages``: ``[{"to", "client-ref"}]`` instead of ``to`` and ``client-ref``.
        Each number is taken as one submission would be; the answer is ``{"results":
        [...]}``, one single submission's answer per number, in order. A scripted HTTP
        error, or a refusal of the whole account, answers for the whole request."""
        try:
            data = json.loads(await request.body())
            msgs = data["messages"]
            common = {k: str(v) for k, v in data.items() if k != "messages"}
            numbers = [(str(m["to"]), str(m["client-ref"])) for m in msgs]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError):
            return JSONResponse({"error": "want {..., \"messages\": [{\"to\","
                                          " \"client-ref\"}]}"}, status_code=400)
        self.requests += 1
        self.batch_requests += 1
        self.batch_sizes.append(len(numbers))
        results: list[Any] = []
        for to, ref in numbers:
            answer = await self._submit({**common, "to": to, "client-ref": ref})
            if answer.status_code != 200:
                return answer
            results.append(json.loads(bytes(answer.body)))
        return JSONResponse({"results": results})

    async def _submit(self, params: dict[str, str]) -> Response:
        b = self.behaviour
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
        refusal = self.account.refusal()
        if refusal is not None:
            return _answer(to, ref, refusal[0], error=refusal[1])
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
        count = segment(params.get("text", ""),
                        params.get("national-language") == "turkish").count
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
        stats.pull_receipts = []
        stats.callback = callback
        if not silent and taken:
            # Pushed (when asked for, and for push_rate of the messages) or known only
            # to a status request (GET /sms/status).
            push = bool(callback) and params.get("status-report-req", "1") != "0" and (
                b.push_rate >= 1.0 or self.rng.random() < b.push_rate) and (
                step is None or step.get("push", True) is not False)
            await self._report(callback, to, ref, taken, stats, step or {}, push)
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
                      stats: RefStats, step: dict[str, Any], push: bool = True) -> None:
        """Receipts for every part taken, each under its part's id, with the client-ref;
        pushed when ``push``, and kept for status requests either way (the final ones,
        known ``delay_min_ms`` after the submission).

        The parts of one message share its fate (the final word), except one part that
        fails on its own: at ``part_fail_rate``, or the scripted ``fail_part``. A scripted
        ``report_order`` (part numbers) pushes the final receipts one after the other
        in that order, each once the previous was taken.
        """
        b = self.behaviour
        rng = self.rng
        stats.pushed = push
        if push and b.unknown_ref_rate and rng.random() < b.unknown_ref_rate:
            self.unknown_refs_reported += 1
            ghost = "GHOST" + secrets.token_hex(8).upper()
            self.receipts.later(Receipt(url, self._receipt(to, ghost, secrets.token_hex(8).upper(),
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
        stats.pull_receipts = [r.params for r in (in_order if isinstance(order, list)
                                                  else now) if r.final]
        stats.known_at = sent_at + b.delay_min_ms / 1000
        if not push:
            return
        if isinstance(order, list):
            ids = dict(taken)
            wanted = [ids[int(p)] for p in order if int(p) in ids]
            wanted += [m for _, m in taken if m not in wanted]
            in_order.sort(key=lambda r: wanted.index(r.params["messageId"]))
        for receipt in now + in_order + later:
            stats.reports.append(receipt.params["status"])
        if in_order:
            self.receipts.in_sequence(in_order, self._delay_s())
        if b.early_reports and rng.random() < b.early_reports:
            for receipt in now:
                # Pushed before the submission is answered, once: a receipt that does
                # not get through is retried in the background (as a provider's
                # webhook queue does), so the submission's answer never waits on it.
                if not await self.receipts.push(receipt, inline=True, tries=1):
                    self.receipts.later(receipt, 0.2)
        else:
            delay = self._delay_s()
            for i, receipt in enumerate(now):
                self.receipts.later(receipt, delay + i * 0.01)
        base = self._delay_s()
        for i, receipt in enumerate(later):
            self.receipts.later(receipt, base + 0.05 * (i + 1))

    def _delay_s(self) -> float:
        b = self.behaviour
        return self.rng.uniform(b.delay_min_ms, b.delay_max_ms) / 1000

    def _receipt(self, to: str, ref: str, message_id: str, status: str,
                 at_s: float) -> dict[str, str]:
        return receipt_params(self.behaviour, to, ref, message_id, status, at_s)

    # -- test hooks --------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        push = self.receipts
        return {
            "submissions": self.submissions,
            "duplicates_submitted": self.duplicates_submitted,
            "throttled": self.throttled,
            "reports_pushed": push.reports_pushed,
            "reports_acknowledged": push.reports_acknowledged,
            "reports_given_up": push.reports_given_up,
            "unknown_refs_reported": self.unknown_refs_reported,
            **self.account.snapshot(),
            "requests": self.requests,
            "batch_requests": self.batch_requests,
            "batch_sizes": self.batch_sizes,
            "pending_reports": push.pending,
            "last_report_ms": push.last_report_ms,
            "last_final_report_ms": push.last_final_report_ms,
            "delivery_status": dict(push.delivery_status),
            "pull_requests": self.status_desk.requests,
            "pull_refs_asked": self.status_desk.refs_asked,
            "refs": {
                ref: {"received": s.received, "received_ms": s.received_ms,
                      "accepted": s.accepted,
                      "message_id": s.message_id, "message_ids": s.message_ids,
                      "parts": s.parts, "final": s.final, "part_finals": s.part_finals,
                      "reports": s.reports, "delivered": s.delivered,
                      "pushed": s.pushed, "pulls": s.pulls}
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
        return inbound_params(self.behaviour, sender, to, text, message_id, concat)

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
        client = await self.receipts.idle_clients().get()
        try:
            for i, piece in enumerate(pieces, start=1):
                concat = (ref, i, parts) if parts > 1 else None
                part_id = message_id if parts == 1 else f"{message_id}-{i}"
                params = self.inbound_params(data["from"], to, piece, part_id, concat)
                try:
                    resp = await self.receipts.send(client, Receipt(url, params, ""))
                    statuses.append(resp.status_code)
                except httpx.HTTPError as exc:
                    statuses.append(type(exc).__name__)
        finally:
            self.receipts.idle_clients().put_nowait(client)
        return JSONResponse({"messageId": message_id, "statuses": statuses})

    async def reset(self, request: Request) -> Response:
        self.script.clear()
        self.status_desk.script.clear()
        self.refs.clear()
        self.duplicates_submitted = self.submissions = self.throttled = 0
        self.requests = self.batch_requests = 0
        self.batch_sizes = []
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

