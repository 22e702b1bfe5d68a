"""A fake Verimor SMS API v2, written from Verimor's API guide alone.

The guide is "VERİMOR SMS API DÖKÜMANI" (``user_guide.md`` of ``verimor/SMS-API``). This
fake answers as its sections say, and imports nothing of the appliance's own Verimor
client, so a test of the client against it checks the client against the guide:

* ``POST /v2/send.json`` ("SMS GÖNDERİMİ (POST)"): ``username``/``password``, one or
  many ``messages[]`` of ``{"msg", "dest": "n1,n2", "id": "i1,i2"}`` (the ids count only
  when there are as many as numbers), ``source_addr`` one of the account's headers (empty:
  the first), ``datacoding`` 0/1/2, ``custom_id``. ``200`` and the campaign id as plain
  text; ``400`` and one word of "HATA KODLARI"; ``401`` for the credentials or an address
  not allowed. A number sent the same text by the same header today ends
  ``DOUBLE_SEND_ERROR`` (the state table).
* the report push ("PUSH ile Gönderim Raporu Alımı"): a JSON array POSTed to the push URL;
  without ``200`` tried three more times (``retry_delay_s`` apart, five minutes in
  Verimor), then never again. ``push`` = ``"all"``, ``"none"`` or ``"half"`` (every other
  message).
* ``GET /v2/status`` ("HTTP GET ile Gönderim Raporu Alımı"): ``id`` or ``custom_id``,
  optional ``dest`` and ``greater_than``, at most 100 entries; ``404`` "Bu idye sahip
  kampanya bulunamadı".
* a message is ``WAITING`` for ``settle_s`` (0: at once), then has its fate (``fates``,
  by number; ``DELIVERED`` else); it is pushed then. ``send_limit_per_min`` and
  ``status_limit_per_min`` (the guide's 240 and 20, "GENEL NOTLAR"; off by default)
  answer ``429`` past them.
* ``GET /v2/balance`` ("SMS KALAN KREDİ SORGULAMA"), ``GET /v2/headers`` ("SMS BAŞLIK
  LİSTESİ ALIMI"), and the inbound push ("PUSH ile Gelen SMS Alımı").

Parts and credits follow "SMS BOY KARAKTER LİMİTLERİ". Answers on demand:
:meth:`VerimorFake.answer_next` queues the next send answers (status and body).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from appliance.simulator.app_thread import AppThread

LIMITS = {"0": (160, 306, 459, 612, 765, 918, 1071), "1": (155, 298, 447, 596, 745, 894, 1043),
          "2": (70, 134, 201, 268, 335, 402, 469)}
TWICE = set("^{}\\[]~|€")
TURKISH = set("ŞşĞğçıİ")
NUMBER = re.compile(r"90[0-9]{10}|(?:00|\+)[1-9][0-9]{6,14}")
TRT = timedelta(hours=3)


def parts(text: str, coding: str) -> int | None:
    size = len(text) if coding == "2" else sum(2 if c in TWICE else 1 for c in text)
    return next((i for i, most in enumerate(LIMITS[coding], 1) if size <= most), None)


@dataclass
class FakeMessage:
    campaign_id: int
    campaign_custom_id: str | None
    message_id: int
    custom_id: str | None
    dest: str
    size: int
    status: str = "WAITING"
    gsm_error: str = "0"
    done_at: str | None = None
    fate: tuple[str, str] = ("DELIVERED", "0")  # the status it settles to, its gsm_error
    settles_at: float = 0.0  # time.monotonic() from which it has its fate

    def settle(self, now: float) -> None:
        """Waiting for the operator until ``settles_at``, then its fate."""
        if self.status == "WAITING" and now >= self.settles_at:
            self.status, self.gsm_error = self.fate
            if self.status != "WAITING":
                self.done_at = (datetime.now(UTC) + TRT).strftime("%Y-%m-%d %H:%M:%S")

    def entry(self) -> dict[str, Any]:
        self.settle(time.monotonic())
        return {"campaign_id": self.campaign_id, "campaign_custom_id": self.campaign_custom_id,
                "message_id": str(self.message_id), "message_custom_id": self.custom_id,
                "dest": self.dest, "size": self.size, "international_multiplier": 1,
                "credits": self.size, "status": self.status, "gsm_error": self.gsm_error,
                "sent_at": self.done_at if self.status in ("DELIVERED", "SENT") else None,
                "done_at": self.done_at}


@dataclass
class VerimorFake:
    """The fake's account and knobs; :meth:`app` is its Starlette app."""

    username: str = "908501234567"
    password: str = "api-pass-1"
    headers: list[str] = field(default_factory=lambda: ["BASLIGIM"])
    credit: int = 100_000
    ip_allowed: bool = True
    push_url: str = ""
    push: str = "all"  # all | none | half
    retry_delay_s: float = 0.2
    settle_s: float = 0.0  # how long a message is WAITING before its fate (and its push)
    # The guide's limits ("GENEL NOTLAR"): 240 send requests and 20 status queries a
    # minute, then 429. 0: no limit (the default, so tests may go fast).
    send_limit_per_min: int = 0
    status_limit_per_min: int = 0
    fates: dict[str, tuple[str, str]] = field(default_factory=dict)  # dest -> (status, gsm)
    campaigns: dict[int, list[FakeMessage]] = field(default_factory=dict)
    custom_ids: dict[str, int] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    pushes: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    sends: list[dict[str, Any]] = field(default_factory=list)
    _queued: list[tuple[int, str]] = field(default_factory=list)
    _recent: dict[str, list[float]] = field(default_factory=dict)
    _sent_today: set[tuple[str, str, str]] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(13582300))
    _campaign_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(20121))

    def answer_next(self, status: int, body: str, times: int = 1) -> None:
        self._queued.extend([(status, body)] * times)

    def messages(self) -> list[FakeMessage]:
        return [m for c in self.campaigns.values() for m in c]

    # -- the API -----------------------------------------------------------------------

    def _over_limit(self, what: str, per_min: int) -> bool:
        """One more ``what`` request; whether it is over ``per_min`` in the last minute."""
        if per_min <= 0:
            return False
        now = time.monotonic()
        recent = [t for t in self._recent.get(what, []) if now - t < 60.0]
        over = len(recent) >= per_min
        if not over:
            recent.append(now)
        self._recent[what] = recent
        return over

    def _auth(self, username: object, password: object) -> Response | None:
        if not self.ip_allowed:
            return PlainTextResponse("Hesabınızda izinli IP ayarları yapılmamış", 401)
        if username != self.username or password != self.password:
            return PlainTextResponse("Geçersiz kullanıcı adı/şifre", 401)
        return None

    async def send(self, request: Request) -> Response:
        self.requests["send"] += 1
        if self._over_limit("send", self.send_limit_per_min):
            return PlainTextResponse("Too Many Requests", 429)
        if self._queued:
            code, text = self._queued.pop(0)
            return Response(text, code, media_type="text/plain")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return PlainTextResponse("INVALID_JSON", 400)
        if not isinstance(body, dict):
            return PlainTextResponse("INVALID_JSON", 400)
        self.sends.append(body)
        refused = self._auth(body.get("username"), body.get("password"))
        if refused is not None:
            return refused
        header = body.get("source_addr") or self.headers[0]
        if header not in self.headers:
            return PlainTextResponse("INVALID_SOURCE_ADDRESS", 400)
        coding = str(body.get("datacoding", ""))
        if coding not in ("", "0", "1", "2"):
            return PlainTextResponse("INVALID_DATACODING", 400)
        wanted: list[tuple[str, str, str | None, int]] = []
        for item in body.get("messages") or []:
            msg, dests = item.get("msg"), str(item.get("dest") or "")
            if not msg:
                return PlainTextResponse("MISSING_MESSAGE", 400)
            if not dests:
                return PlainTextResponse("MISSING_DESTINATION_ADDRESS", 400)
            numbers = dests.split(",")
            ids = str(item.get("id") or "").split(",")
            if len(ids) != len(numbers):
                ids = [""] * len(numbers)
            used = coding or ("1" if TURKISH & set(msg) else "0")
            size = parts(msg, used)
            if size is None:
                return PlainTextResponse("MESSAGE_TOO_LONG", 400)
            for number, our_id in zip(numbers, ids, strict=True):
                if not NUMBER.fullmatch(number):
                    return PlainTextResponse("INVALID_DESTINATION_ADDRESS", 400)
                wanted.append((number, msg, our_id or None, size))
        if not wanted:
            return PlainTextResponse("MISSING_MESSAGE", 400)
        if len(wanted) > 50_000:
            return PlainTextResponse("MESSAGE_COUNT_LIMIT_EXCEEDED", 400)
        cost = sum(w[3] for w in wanted)
        if cost > self.credit:
            return PlainTextResponse("INSUFFICIENT_CREDITS", 400)
        self.credit -= cost
        campaign = next(self._campaign_ids)
        custom = body.get("custom_id")
        if custom:
            self.custom_ids[str(custom)] = campaign
        made = []
        settles_at = time.monotonic() + self.settle_s
        for number, text, ours, size in wanted:
            fm = FakeMessage(campaign, custom, next(self._ids), ours, number, size,
                             fate=self.fates.get(number, ("DELIVERED", "0")),
                             settles_at=settles_at)
            key = (number, text, header)
            if key in self._sent_today:
                fm.fate = ("DOUBLE_SEND_ERROR", "0")
            self._sent_today.add(key)
            fm.settle(time.monotonic())
            made.append(fm)
        self.campaigns[campaign] = made
        pushed = [m for i, m in enumerate(made) if self.push == "all"
                  or (self.push == "half" and m.message_id % 2 == 0)]
        task = BackgroundTask(self._push, pushed)
        return PlainTextResponse(str(campaign), 200, background=task)

    async def _push(self, messages: list[FakeMessage]) -> None:
        if not messages or not self.push_url:
            return
        if self.settle_s > 0:
            await asyncio.sleep(self.settle_s)
        entries = [dict(m.entry(), type="outbound") for m in messages]
        async with httpx.AsyncClient(timeout=5) as client:
            for attempt in range(4):  # once, then three more times, then never again
                try:
                    got = await client.post(self.push_url, json=entries)
                    self.pushes.append((got.status_code, entries))
                    if got.status_code == 200:
                        return
                except httpx.HTTPError:
                    self.pushes.append((0, entries))
                if attempt < 3:
                    await asyncio.sleep(self.retry_delay_s)

    async def status(self, request: Request) -> Response:
        self.requests["status"] += 1
        if self._over_limit("status", self.status_limit_per_min):
            return PlainTextResponse("Too Many Requests", 429)
        q = request.query_params
        refused = self._auth(q.get("username"), q.get("password"))
        if refused is not None:
            return refused
        campaign_id: int | None = None
        if q.get("id", "").isdigit():
            campaign_id = int(q["id"])
        elif q.get("custom_id"):
            campaign_id = self.custom_ids.get(q["custom_id"])
        else:
            return PlainTextResponse("id veya custom_id zorunludur", 400)
        if campaign_id is None or campaign_id not in self.campaigns:
            return PlainTextResponse("Bu idye sahip kampanya bulunamadı", 404)
        found = self.campaigns[campaign_id]
        if q.get("dest"):
            wanted = set(q["dest"].split(","))
            found = [m for m in found if m.dest in wanted]
        if q.get("greater_than", "").isdigit():
            found = [m for m in found if m.message_id > int(q["greater_than"])]
        return JSONResponse([m.entry() for m in found[:100]])

    async def balance(self, request: Request) -> Response:
        self.requests["balance"] += 1
        q = request.query_params
        return self._auth(q.get("username"), q.get("password")) or \
            PlainTextResponse(str(self.credit))

    async def header_list(self, request: Request) -> Response:
        q = request.query_params
        return self._auth(q.get("username"), q.get("password")) or JSONResponse(self.headers)

    def push_inbound(self, source_addr: str, content: str, message_id: int = 1234) -> int:
        """Push one inbound message as the guide's example; the answer's status."""
        stamp = (datetime.now(UTC) + TRT).strftime("%Y-%m-%d %H:%M:%S")
        entry = {"message_id": message_id, "type": "inbound", "created_at": stamp,
                 "network": "TURKCELL", "source_addr": source_addr,
                 "destination_addr": self.username, "keyword": "", "content": content,
                 "received_at": stamp}
        return httpx.post(self.push_url, json=[entry], timeout=10).status_code

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v2/send.json", self.send, methods=["POST"]),
            Route("/v2/status", self.status, methods=["GET"]),
            Route("/v2/balance", self.balance, methods=["GET"]),
            Route("/v2/headers", self.header_list, methods=["GET"]),
        ])


class RunningFake(AppThread):
    """A :class:`VerimorFake` served on 127.0.0.1 in a thread (``with`` it)."""

    def __init__(self, fake: VerimorFake) -> None:
        super().__init__(fake.app(), "the fake Verimor")
        self.fake = fake
