"""A fake of İletimerkezi's SMS API v1 (JSON), written from its documentation, so that the
``iletimerkezi`` kind and the report puller run without the internet.

Followed: İletimerkezi's API documentation (repository ``iletimerkezi/apidocs-website``,
``docs/sms/send/json.mdx``, ``docs/sms/report/json.mdx``,
``docs/sms/report/webhook.mdx``, ``docs/account/balance/json.mdx``,
``docs/status-codes.mdx``). Self-contained: it shares no code with the kind it stands in
for, so a misreading of the documentation in one is not repeated in the other.

- ``POST /v1/send-sms/json``: ``request.authentication.{key,hash}`` checked (401), the
  ``sender`` against the approved başlıks (450; 459 empty), ``iys``/``iysList`` (468,
  469), ``message`` (one object or a list) with ``text`` (454 empty, 453 over seven
  SMS) and ``receipents.number`` (a list, or one number; formats ``905xxxxxxxxx``,
  ``+90 5xx xxx xx xx``, ``5xxxxxxxxx``; anything else 452), the credit (402, one credit
  a number and SMS part), the same text to the same numbers within ten minutes (451).
  The answer carries the code in ``response.status.code`` and as the HTTP status; a
  taken order answers ``order.id``.
- ``POST /v1/get-report/json``: ``order.id`` (455 unknown), ``page``, ``rowCount`` (at
  most 1000); ``order.message[]`` of ``{"number": 5321234567, "status": 110|111|112}``.
- ``POST /v1/get-balance/json``: ``balance.amount`` and ``balance.sms``.
- A body that is not JSON of ``{"request": ...}`` is 400; another path 404.

Test hooks (not İletimerkezi's): ``POST /_fake/script`` ``{"endpoint": "send-sms",
"answers": [...]}`` queues exact answers for the next requests to that endpoint (each
``{"code": 402}``, or ``{"http": 502, "body": "<html>...", "content_type":
"text/html"}``, or ``{"truncate": true}``: the order is taken, its answer cut short);
``POST /_fake/status`` ``{"order": id, "number": "5321234567", "status": 111}`` sets a
message's status and pushes the webhook report when a webhook URL is set;
``GET /_fake/state`` shows the orders and every request received.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MESSAGES = {
    200: "İşlem başarılı", 400: "İstek çözümlenemedi", 401: "Üyelik bilgileri hatalı",
    402: "Bakiye yetersiz", 404: "API istek yapılan yönteme sahip değil",
    450: "Gönderilen başlık kullanıma uygun değil", 451: "Tekrar eden sipariş",
    452: "Mesaj alıcıları hatalı", 453: "Sipariş boyutu aşıldı", 454: "Mesaj metni boş",
    455: "Sipariş bulunamadı", 456: "Sipariş gönderim tarihi henüz gelmedi",
    457: "Mesaj gönderim tarihinin formatı hatalı", 459: "Başlık boş bırakılamaz",
    466: "Hatalı numara",
    468: "IYS üzerinden sorgulama yapılıp, yapılmayacağını ayarlamalısınız.",
    469: "IYS listenizi seçmelisiniz, BIREYSEL veya TACIR.",
    503: "Sunucu geçici olarak hizmet veremiyor",
}
"""The status messages the documentation gives, in its Turkish (the API's language)."""

DUPLICATE_WINDOW_S = 600.0
MAX_SMS = 7
ROW_MAX = 1000


@dataclass
class Account:
    """What the fake's account holds."""

    key: str = "demo-key"
    hash: str = "demo-hash"
    senders: tuple[str, ...] = ("APITEST",)
    sms: int = 100_000  # SMS credits
    amount: str = "0"  # TL
    # What get-report says of a message until a test sets it: 110 being sent, 111 sent.
    initial_status: int = 110
    webhook_url: str = ""


@dataclass
class Order:
    id: int
    sender: str
    text: str
    numbers: list[str]  # national form, 5xxxxxxxxx
    statuses: list[int]
    at: float


@dataclass
class FakeState:
    orders: dict[int, Order] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    scripts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    recent: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    next_id: int = 1_000_001


def national(number: object) -> str | None:
    """A number in a documented format as ``5xxxxxxxxx``; ``None`` for anything else."""
    if isinstance(number, bool) or not isinstance(number, (str, int)):
        return None
    text = str(number).replace(" ", "")
    text = text.removeprefix("+")
    if not text.isdigit():
        return None
    if len(text) == 12 and text.startswith("905"):
        return text[2:]
    if len(text) == 11 and text.startswith("05"):
        return text[1:]
    if len(text) == 10 and text.startswith("5"):
        return text
    return None


def sms_count(text: str) -> int:
    """SMS parts of ``text``: GSM-7 when every character is ASCII, else UCS-2."""
    if text.isascii():
        return 1 if len(text) <= 160 else -(-len(text) // 153)
    return 1 if len(text) <= 70 else -(-len(text) // 67)


def answer(code: int, **extra: Any) -> Response:
    """İletimerkezi's envelope: the code in the body and as the HTTP status (200 for a
    code HTTP cannot carry as a final status: the report codes 110-115)."""
    body = {"response": {"status": {"code": code, "message": MESSAGES.get(code, "")},
                         **extra}}
    return JSONResponse(body, status_code=code if 200 <= code < 600 else 200)


class IletimerkeziFake:
    """The fake API as a Starlette app (``app``), its account and its state."""

    def __init__(self, account: Account | None = None) -> None:
        self.account = account or Account()
        self.state = FakeState()
        self.lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/send-sms/json", self._send, methods=["POST"]),
            Route("/v1/get-report/json", self._report, methods=["POST"]),
            Route("/v1/get-balance/json", self._balance, methods=["POST"]),
            Route("/_fake/script", self._script, methods=["POST"]),
            Route("/_fake/status", self._set_status, methods=["POST"]),
            Route("/_fake/state", self._show, methods=["GET"]),
            Route("/{path:path}", self._unknown, methods=["GET", "POST"]),
        ])

    # -- what every API request goes through ---------------------------------------------

    async def _read(self, request: Request, endpoint: str
                    ) -> tuple[dict[str, Any] | None, Response | None]:
        """The request's ``request`` object, or the answer to give instead."""
        raw = await request.body()
        with self.lock:
            self.state.received.append({"endpoint": endpoint, "body": raw.decode("utf-8",
                                        "replace"), "content_type":
                                        request.headers.get("content-type", "")})
            script = self.state.scripts.get(endpoint) or []
            step = script.pop(0) if script else None
        if step is not None and not step.get("truncate"):
            if "http" in step:
                return None, Response(step.get("body", ""), status_code=int(step["http"]),
                                      media_type=step.get("content_type", "text/html"))
            return None, answer(int(step["code"]))
        try:
            data = json.loads(raw)
            req = data["request"]
            auth = req["authentication"]
        except (ValueError, KeyError, TypeError):
            return None, answer(400)
        if not isinstance(req, dict) or not isinstance(auth, dict):
            return None, answer(400)
        if (auth.get("key"), auth.get("hash")) != (self.account.key, self.account.hash):
            return None, answer(401)
        if step is not None:
            req["_truncate"] = True
        return req, None

    # -- send ---------------------------------------------------------------------------

    async def _send(self, request: Request) -> Response:
        req, refusal = await self._read(request, "send-sms")
        if req is None:
            assert refusal is not None
            return refusal
        order = req.get("order")
        if not isinstance(order, dict):
            return answer(400)
        sender = order.get("sender")
        if not isinstance(sender, str) or not sender:
            return answer(459)
        if sender not in self.account.senders:
            return answer(450)
        if str(order.get("iys", "")) not in ("0", "1"):
            return answer(468)
        if str(order.get("iys")) == "1" and order.get("iysList") not in ("BIREYSEL", "TACIR"):
            return answer(469)
        messages = order.get("message")
        messages = messages if isinstance(messages, list) else [messages]
        parts: list[tuple[str, list[str]]] = []
        for message in messages:
            if not isinstance(message, dict):
                return answer(400)
            text = message.get("text")
            if not isinstance(text, str) or not text.strip():
                return answer(454)
            if sms_count(text) > MAX_SMS:
                return answer(453)
            receipents = message.get("receipents")
            given = receipents.get("number") if isinstance(receipents, dict) else None
            given = given if isinstance(given, list) else [given]
            numbers = [national(n) for n in given]
            if not numbers or any(n is None for n in numbers):
                return answer(452)
            parts.append((text, [n for n in numbers if n is not None]))
        return self._take(sender, parts, truncate=bool(req.get("_truncate")))

    def _take(self, sender: str, parts: list[tuple[str, list[str]]], truncate: bool
              ) -> Response:
        now = time.monotonic()
        with self.lock:
            for text, numbers in parts:
                seen = self.state.recent.get((text, tuple(sorted(numbers))))
                if seen is not None and now - seen < DUPLICATE_WINDOW_S:
                    return answer(451)
            cost = sum(sms_count(t) * len(n) for t, n in parts)
            if cost > self.account.sms:
                return answer(402)
            self.account.sms -= cost
            order_id = self.state.next_id
            self.state.next_id += 1
            numbers = [n for _, ns in parts for n in ns]
            for text, ns in parts:
                self.state.recent[(text, tuple(sorted(ns)))] = now
            self.state.orders[order_id] = Order(
                order_id, sender, parts[0][0], numbers,
                [self.account.initial_status] * len(numbers), now)
        if truncate:
            whole = json.dumps({"response": {"status": {"code": "200", "message":
                               MESSAGES[200]}, "order": {"id": str(order_id)}}})
            return Response(whole[: len(whole) // 2], media_type="application/json")
        # As the documentation's sample: the code and the id as text.
        return JSONResponse({"response": {"status": {"code": "200", "message": MESSAGES[200]},
                                          "order": {"id": str(order_id)}}})

    # -- report and balance -------------------------------------------------------------

    async def _report(self, request: Request) -> Response:
        req, refusal = await self._read(request, "get-report")
        if req is None:
            assert refusal is not None
            return refusal
        asked = req.get("order")
        if not isinstance(asked, dict):
            return answer(400)
        try:
            order_id = int(asked.get("id", ""))
            page = int(asked.get("page") or 1)
            rows = min(int(asked.get("rowCount") or ROW_MAX), ROW_MAX)
        except (TypeError, ValueError):
            return answer(455)
        if page < 1 or rows < 1:
            return answer(400)
        with self.lock:
            order = self.state.orders.get(order_id)
            if order is None:
                return answer(455)
            listed = list(zip(order.numbers, order.statuses, strict=True))
        chosen = listed[(page - 1) * rows: page * rows]
        status = 113 if any(s == 110 for _, s in listed) else (
            114 if any(s == 111 for _, s in listed) else 115)
        return answer(200, order={
            "id": order_id, "status": status,
            "message": [{"number": int(n), "status": s} for n, s in chosen]})

    async def _balance(self, request: Request) -> Response:
        req, refusal = await self._read(request, "get-balance")
        if req is None:
            assert refusal is not None
            return refusal
        return answer(200, balance={"amount": self.account.amount,
                                    "sms": str(self.account.sms)})

    async def _unknown(self, request: Request) -> Response:
        return answer(404)

    # -- test hooks ---------------------------------------------------------------------

    async def _script(self, request: Request) -> Response:
        data = await request.json()
        with self.lock:
            self.state.scripts.setdefault(str(data["endpoint"]), []).extend(data["answers"])
        return JSONResponse({"queued": len(data["answers"])})

    async def _set_status(self, request: Request) -> Response:
        data = await request.json()
        number = national(data["number"])
        with self.lock:
            order = self.state.orders[int(data["order"])]
            index = order.numbers.index(number or "")
            order.statuses[index] = int(data["status"])
        pushed = None
        if self.account.webhook_url:
            word = {110: "accepted", 111: "delivered", 112: "undelivered"}[int(data["status"])]
            report = {"report": {"id": order.id * 1000 + index, "packet_id": order.id,
                                 "status": word, "to": f"+90{number}", "body": order.text}}
            async with httpx.AsyncClient(timeout=10) as client:
                pushed = (await client.post(self.account.webhook_url, json=report)).status_code
        return JSONResponse({"pushed": pushed})

    async def _show(self, request: Request) -> Response:
        with self.lock:
            orders = {str(o.id): {"sender": o.sender, "text": o.text, "numbers": o.numbers,
                                  "statuses": o.statuses}
                      for o in self.state.orders.values()}
            return JSONResponse({"orders": orders, "received": list(self.state.received),
                                 "sms": self.account.sms})


class FakeServer:
    """The fake on 127.0.0.1 (a free port unless given), in a daemon thread."""

    def __init__(self, fake: IletimerkeziFake | None = None, port: int = 0) -> None:
        self.fake = fake or IletimerkeziFake()
        config = uvicorn.Config(self.fake.app, host="127.0.0.1", port=port, log_config=None,
                                access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="iletimerkezi-fake",
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What a provider table's ``base_url`` is set to."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 10.0) -> FakeServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the İletimerkezi fake did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
