"""A fake Netgsm, written from Netgsm's own client library alone.

The reference is the ``netgsm/sms`` Composer package (``src/SmsSend.php`` and
``README.md`` of the ``netgsm/sms`` repository), which carries Netgsm's documented
requests and answer codes; the report states 14-17 come from Netgsm's JavaScript SDK
(``src/enums.ts`` of ``netgsm/netgsm-sms-js``). This fake answers as they say and
imports nothing of the appliance's own Netgsm client, so a test of the client against it
checks the client against the reference:

* ``POST /sms/send/xml`` (``smsGonder``, "1:n SMS GÖNDERİMİ"; ``n:n`` too): an XML
  ``<mainbody>`` with ``<header>`` (``usercode``, ``password``, ``type``, ``msgheader``,
  ``filter``, ``encoding``...) and ``<body>`` (``<msg>`` and one ``<no>`` a number, or
  ``<mp>`` pairs). Answers ``00 <bulk id>``, or one code: ``20`` text problem (over 917
  characters), ``30`` credentials or the address not allowed, ``40`` header not
  defined, ``50``/``51`` İYS not open / no İYS brand (for ``filter`` 11 or 12), ``70``
  bad parameters, ``80`` send limit, ``85`` more than 20 tasks for one number in a
  minute. ``GET``/``POST /sms/send/get`` (``smsgonder1_1``): the same with ``gsmno``,
  ``message``, ``msgheader``, ``filter`` as form or query fields.
* ``GET /sms/report`` (``smsSorgulama``): ``bulkid``, ``type`` (0 one bulk id, 1 several
  joined by commas, the bulk id then leads each line), ``status`` (100: every state),
  ``version=2``, ``telno``; lines ``<number> <state> <operator> <parts> <dd.mm.yyyy>
  <HH:MM:SS> <hatakod>`` joined by ``<br>``, or ``60`` (no record), ``30``, ``70``,
  ``80`` (past 10 queries a minute).
* ``POST /balance/list/xml`` (``kredisorgu``, ``<stip>2</stip>``): ``00 <credit>`` with a
  decimal comma; ``30``, ``70``.
* ``POST /sms/receive`` (``gelensms``): ``<number>|<text>|<dd.mm.yyyy HH:MM:SS>`` lines
  joined by ``<br>``; ``40`` none; ``50`` bad date; ``60`` over 30 days; without dates
  each message is listed once only.

Knobs: the account (``usercode``, ``password``, ``headers``, ``credit``,
``ip_allowed``, ``iys``, ``iys_brand``), ``fates`` (number -> state and ``hatakod``),
``pending`` (numbers that stay state 0), ``send_limit_per_min``, and
:meth:`NetgsmFake.answer_next` (the next answers of an endpoint, as given: HTML,
truncated, any code).
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.etree import ElementTree

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from appliance.simulator.app_thread import AppThread

TRT = timedelta(hours=3)
MAX_TEXT = 917  # the reference: "Standart maksimum karakter sayısı 917"
VALID = re.compile(r"90[0-9]{10}|5[0-9]{9}|05[0-9]{9}|00[1-9][0-9]{6,14}")
TURKISH = set("ŞşĞğçıİ")


def turkey_now() -> datetime:
    return datetime.now(UTC) + TRT


# GSM 03.38: the default alphabet (one septet each) and its extension (two: escape, code).
GSM_BASIC = set("@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
                "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà")
GSM_EXTENDED = set("\f^{}\\[]~|€")


def parts_of(text: str, turkish: bool) -> int:
    """The parts Netgsm charges for ``text``. The reference says only that the count
    and the price depend on ``encoding`` ("SMS boyu hesabı ve ücretlendirme bu
    parametreye bağlı olarak değişecektir"); the fake counts as the network does (GSM
    03.38: 160/153 septets, an extension character two, never split from its escape;
    else UCS-2, 70/67 units), and with ``TR`` as one shift table at its costlier, the
    single shift (155/149 septets, a Turkish letter two)."""
    if turkish:
        costs = [2 if c in TURKISH or c in GSM_EXTENDED else 1 for c in text]
        single, multi = 155, 149
    elif all(c in GSM_BASIC or c in GSM_EXTENDED for c in text):
        costs = [2 if c in GSM_EXTENDED else 1 for c in text]
        single, multi = 160, 153
    else:
        costs = [len(c.encode("utf-16-be")) // 2 for c in text]
        single, multi = 70, 67
    if sum(costs) <= single:
        return 1
    parts, used = 1, 0
    for cost in costs:
        if used + cost > multi:
            parts, used = parts + 1, 0
        used += cost
    return parts


@dataclass
class Task:
    bulk_id: int
    header: str
    text: str
    made_at: datetime
    # number -> [state, hatakod, parts]
    numbers: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class NetgsmFake:
    """The fake's account and knobs; :meth:`app` is its Starlette app."""

    usercode: str = "8503001234"
    password: str = "api-pass-1"
    headers: list[str] = field(default_factory=lambda: ["8503001234", "BASLIGIM"])
    credit: float = 1000.0  # TL
    price: float = 0.05  # TL a part
    ip_allowed: bool = True
    iys: bool = True  # İYS-checked sending open to the account (else 50)
    iys_brand: bool = True  # an İYS brand defined (else 51)
    fates: dict[str, tuple[str, str]] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    send_limit_per_min: int = 0  # 0: none; past it, 80
    report_limit_per_min: int = 10
    duplicate_limit: int = 20  # tasks a minute for one number; past it, 85
    tasks: dict[int, Task] = field(default_factory=dict)
    sends: list[dict[str, Any]] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    inbox: list[tuple[str, str, datetime, bool]] = field(default_factory=list)
    _queued: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    _seen: dict[str, deque[float]] = field(default_factory=dict)
    _bulk_ids: itertools.count[int] = field(
        default_factory=lambda: itertools.count(1311033503))

    def answer_next(self, endpoint: str, body: str, times: int = 1, status: int = 200) -> None:
        """The next ``times`` answers of ``endpoint`` (``send``, ``report``, ``balance``,
        ``receive``) are ``body`` with ``status``, whatever the request."""
        self._queued.setdefault(endpoint, []).extend([(status, body)] * times)

    def receive(self, number: str, text: str, at: datetime | None = None) -> None:
        """An inbound message from ``number`` (Türkiye's clock, now by default)."""
        self.inbox.append((number, text, at or turkey_now(), False))

    def state_of(self, number: str) -> str | None:
        for task in self.tasks.values():
            if number in task.numbers:
                return str(task.numbers[number][0])
        return None

    # -- helpers -----------------------------------------------------------------------

    def _count(self, key: str, limit: int) -> bool:
        """Count one event under ``key``; True when more than ``limit`` in a minute."""
        now = time.monotonic()
        seen = self._seen.setdefault(key, deque())
        while seen and seen[0] < now - 60:
            seen.popleft()
        seen.append(now)
        return bool(limit) and len(seen) > limit

    def _queued_answer(self, endpoint: str) -> Response | None:
        self.requests[endpoint] += 1
        queue = self._queued.get(endpoint)
        if queue:
            status, body = queue.pop(0)
            return Response(body, status, media_type="text/html; charset=UTF-8")
        return None

    def _authorised(self, usercode: object, password: object) -> bool:
        return self.ip_allowed and usercode == self.usercode and password == self.password

    @staticmethod
    def _text(code: str) -> Response:
        return PlainTextResponse(code)

    # -- send --------------------------------------------------------------------------

    async def send_xml(self, request: Request) -> Response:
        queued = self._queued_answer("send")
        if queued is not None:
            return queued
        try:
            root = ElementTree.fromstring(await request.body())
        except ElementTree.ParseError:
            return self._text("70")
        head = root.find("header")
        body = root.find("body")
        if root.tag != "mainbody" or head is None or body is None:
            return self._text("70")

        def h(name: str) -> str:
            return (head.findtext(name) or "").strip()

        company = head.find("company")
        pairs: list[tuple[str, str]] = []
        kind = h("type")
        if kind == "1:n":
            text = body.findtext("msg")
            pairs = [(text or "", (n.text or "").strip()) for n in body.findall("no")]
            if text is None:
                pairs = []
        elif kind == "n:n":
            pairs = [(mp.findtext("msg") or "", (mp.findtext("no") or "").strip())
                     for mp in body.findall("mp")]
        self.sends.append({"path": "/sms/send/xml", "type": kind,
                           "company": company.text if company is not None else None,
                           "dil": company.get("dil") if company is not None else None,
                           "usercode": h("usercode"), "password": h("password"),
                           "msgheader": h("msgheader"), "filter": h("filter"),
                           "encoding": h("encoding"), "pairs": pairs})
        if kind not in ("1:n", "n:n"):
            return self._text("70")
        return self._task(h("usercode"), h("password"), h("msgheader"), h("filter"),
                          h("encoding"), pairs)

    async def send_get(self, request: Request) -> Response:
        queued = self._queued_answer("send")
        if queued is not None:
            return queued
        fields: dict[str, str] = dict(request.query_params)
        if request.method == "POST":
            form = await request.form()
            fields.update({k: str(v) for k, v in form.items()})
        numbers = [n.strip() for n in fields.get("gsmno", "").split(",") if n.strip()]
        text = fields.get("message", "")
        self.sends.append({"path": "/sms/send/get", "type": "get", **fields})
        return self._task(fields.get("usercode"), fields.get("password"),
                          fields.get("msgheader", ""), fields.get("filter", ""),
                          fields.get("encoding", ""), [(text, n) for n in numbers])

    def _task(self, usercode: object, password: object, header: str, filter_: str,
              encoding: str, pairs: list[tuple[str, str]]) -> Response:
        if not self._authorised(usercode, password):
            return self._text("30")
        if (header or str(usercode)) not in self.headers:  # none: the user code's number
            return self._text("40")
        if not pairs or any(not n for _, n in pairs) or filter_ not in ("", "0", "11", "12"):
            return self._text("70")
        if any(not t.strip() or len(t) > MAX_TEXT for t, _ in pairs):
            return self._text("20")
        if filter_ in ("11", "12"):
            if not self.iys:
                return self._text("50")
            if not self.iys_brand:
                return self._text("51")
        if self._count("send", self.send_limit_per_min):
            return self._text("80")
        if any(self._count(f"no:{n}", self.duplicate_limit) for _, n in pairs):
            return self._text("85")
        task = Task(next(self._bulk_ids), header, pairs[0][0], turkey_now())
        for text, number in pairs:
            size = parts_of(text, encoding.upper() == "TR")
            if not VALID.fullmatch(number):
                state, error = "3", "105"
            elif number in self.pending:
                state, error = "0", "0"
            elif self.credit < size * self.price:
                state, error = "14", "0"
            else:
                self.credit -= size * self.price
                state, error = self.fates.get(number, ("1", "0"))
            task.numbers[number] = [state, error, size]
        self.tasks[task.bulk_id] = task
        return self._text(f"00 {task.bulk_id}")

    # -- the report query --------------------------------------------------------------

    async def report(self, request: Request) -> Response:
        queued = self._queued_answer("report")
        if queued is not None:
            return queued
        q = request.query_params
        if not self._authorised(q.get("usercode"), q.get("password")):
            return self._text("30")
        if self._count("report", self.report_limit_per_min):
            return self._text("80")
        kind, wanted = q.get("type", "0"), q.get("status", "100")
        if kind not in ("0", "1") or not wanted.isdigit():
            return self._text("70")
        ids = [b for b in q.get("bulkid", "").split(",") if b]
        if not ids or not all(b.isdigit() for b in ids):
            return self._text("70")
        telno = q.get("telno", "")
        lines = []
        for bulk in ids:
            task = self.tasks.get(int(bulk))
            if task is None:
                continue
            for number, (state, error, size) in task.numbers.items():
                if (wanted != "100" and state != wanted) or (telno and number != telno):
                    continue
                operator = "30" if number.startswith(("90", "5", "05")) else "212"
                stamp = task.made_at.strftime("%d.%m.%Y %H:%M:%S")
                line = f"{number} {state} {operator} {size} {stamp} {error}"
                lines.append(f"{bulk} {line}" if kind == "1" else line)
        if not lines:
            return self._text("60")
        return PlainTextResponse("<br>".join(lines) + "<br>")

    # -- the balance -------------------------------------------------------------------

    async def balance(self, request: Request) -> Response:
        queued = self._queued_answer("balance")
        if queued is not None:
            return queued
        try:
            head = ElementTree.fromstring(await request.body()).find("header")
        except ElementTree.ParseError:
            return self._text("70")
        if head is None:
            return self._text("70")
        if not self._authorised(head.findtext("usercode"), head.findtext("password")):
            return self._text("30")
        if (head.findtext("stip") or "").strip() != "2":
            return self._text("70")
        return self._text("00 " + f"{self.credit:.2f}".replace(".", ","))

    # -- inbound -----------------------------------------------------------------------

    async def inbound(self, request: Request) -> Response:
        queued = self._queued_answer("receive")
        if queued is not None:
            return queued
        try:
            head = ElementTree.fromstring(await request.body()).find("header")
        except ElementTree.ParseError:
            return self._text("70")
        if head is None:
            return self._text("70")
        if not self._authorised(head.findtext("usercode"), head.findtext("password")):
            return self._text("30")
        start, stop = ((head.findtext(k) or "").strip() for k in ("startdate", "stopdate"))
        lines = []
        if start or stop:
            try:
                since = datetime.strptime(start, "%d%m%Y%H%M")
                until = datetime.strptime(stop, "%d%m%Y%H%M")
            except ValueError:
                return self._text("50")
            if until - since > timedelta(days=30):
                return self._text("60")
            for number, text, at, _ in self.inbox:
                local = at.replace(tzinfo=None)
                if since <= local.replace(second=0, microsecond=0) <= until:
                    lines.append((number, text, at))
        else:  # without dates, each message is listed once only
            for i, (number, text, at, listed) in enumerate(self.inbox):
                if not listed:
                    lines.append((number, text, at))
                    self.inbox[i] = (number, text, at, True)
        if not lines:
            return self._text("40")
        return PlainTextResponse("<br>".join(
            f"{n}|{t}|{at.strftime('%d.%m.%Y %H:%M:%S')}" for n, t, at in lines) + "<br>")

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/sms/send/xml", self.send_xml, methods=["POST"]),
            Route("/sms/send/get", self.send_get, methods=["GET", "POST"]),
            Route("/sms/send/get/", self.send_get, methods=["GET", "POST"]),
            Route("/sms/report", self.report, methods=["GET"]),
            Route("/sms/report/", self.report, methods=["GET"]),
            Route("/balance/list/xml", self.balance, methods=["POST"]),
            Route("/sms/receive", self.inbound, methods=["POST"]),
        ])


class RunningFake(AppThread):
    """A :class:`NetgsmFake` served on 127.0.0.1 in a thread (``with`` it)."""

    def __init__(self, fake: NetgsmFake) -> None:
        super().__init__(fake.app(), "the fake Netgsm")
        self.fake = fake
