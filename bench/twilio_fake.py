"""A fake Twilio Messages API for the pull benchmarks, written from Twilio's API
reference ("Messages resource": create, fetch; "Track the message status of outbound
messages": the status callback and its ``X-Twilio-Signature``), not from our client.

* ``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` (HTTP Basic
  ``AccountSid:AuthToken``; form ``To``, ``From``, ``Body``, ``StatusCallback``):
  ``201`` and the Message resource, ``status`` ``queued``.
* ``GET /2010-04-01/Accounts/{AccountSid}/Messages/{Sid}.json``: the Message resource,
  ``sent`` until its fate (``delay_ms`` after the send, between the bounds), then
  ``delivered``; ``404`` (code 20404) for a sid it never gave.
* With ``push``: at its fate the status callback is POSTed to the message's
  ``StatusCallback``, signed: base64 of HMAC-SHA1, keyed with the auth token, over the
  URL followed by each parameter's name and value, sorted by name.

Counts what a benchmark reads: sends, fetches (``fetches`` by sid) and pushes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from appliance.simulator.app_thread import AppThread

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "bench-auth-token"


def signature(url: str, params: dict[str, str], token: str) -> str:
    signed = url + "".join(k + params[k] for k in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), signed.encode(),
                                     hashlib.sha1).digest()).decode()


@dataclass
class FakeMessage:
    sid: str
    to: str
    sender: str
    body: str
    callback: str
    final_at: float  # monotonic time of its fate

    def resource(self, status: str) -> dict[str, object]:
        return {"sid": self.sid, "account_sid": ACCOUNT_SID, "to": self.to,
                "from": self.sender, "body": self.body, "status": status,
                "error_code": None, "error_message": None, "num_segments": "1",
                "direction": "outbound-api", "api_version": "2010-04-01"}


@dataclass
class TwilioFake:
    push: bool = False
    delay_ms: tuple[int, int] = (50, 500)
    seed: int = 5
    messages: dict[str, FakeMessage] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    fetches: Counter[str] = field(default_factory=Counter)
    pushed: Counter[int] = field(default_factory=Counter)  # by the answer's status
    _rng: random.Random = field(init=False)
    _client: httpx.AsyncClient | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _authorised(self, request: Request, account: str) -> bool:
        expected = base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
        return account == ACCOUNT_SID and \
            request.headers.get("authorization") == f"Basic {expected}"

    async def create(self, request: Request) -> Response:
        self.requests["send"] += 1
        if not self._authorised(request, request.path_params["account"]):
            return JSONResponse({"code": 20003, "message": "Authenticate"}, 401)
        form = await request.form()
        sid = "SM" + secrets.token_hex(16)
        delay = self._rng.uniform(*self.delay_ms) / 1000
        msg = FakeMessage(sid, str(form.get("To", "")), str(form.get("From", "")),
                          str(form.get("Body", "")), str(form.get("StatusCallback", "")),
                          time.monotonic() + delay)
        self.messages[sid] = msg
        if self.push and msg.callback:
            task = asyncio.create_task(self._push(msg, delay))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return JSONResponse(msg.resource("queued"), 201)

    async def fetch(self, request: Request) -> Response:
        self.requests["fetch"] += 1
        if not self._authorised(request, request.path_params["account"]):
            return JSONResponse({"code": 20003, "message": "Authenticate"}, 401)
        sid = request.path_params["sid"]
        msg = self.messages.get(sid)
        if msg is None:
            return JSONResponse({"code": 20404, "message": "The requested resource was"
                                 " not found", "status": 404}, 404)
        self.fetches[sid] += 1
        status = "delivered" if time.monotonic() >= msg.final_at else "sent"
        return JSONResponse(msg.resource(status))

    async def _push(self, msg: FakeMessage, delay: float) -> None:
        await asyncio.sleep(delay)
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=30,
                                             limits=httpx.Limits(max_connections=32))
        params = {"AccountSid": ACCOUNT_SID, "ApiVersion": "2010-04-01", "From": msg.sender,
                  "MessageSid": msg.sid, "MessageStatus": "delivered", "SmsSid": msg.sid,
                  "SmsStatus": "delivered", "To": msg.to}
        headers = {"X-Twilio-Signature": signature(msg.callback, params, AUTH_TOKEN)}
        try:
            got = await self._client.post(msg.callback, data=params, headers=headers)
            self.pushed[got.status_code] += 1
        except httpx.HTTPError:
            self.pushed[0] += 1

    def app(self) -> Starlette:
        base = "/2010-04-01/Accounts/{account}/Messages"
        return Starlette(routes=[
            Route(base + ".json", self.create, methods=["POST"]),
            Route(base + "/{sid}.json", self.fetch, methods=["GET"]),
        ])


class RunningTwilio(AppThread):
    """A :class:`TwilioFake` served on 127.0.0.1 in a thread (``with`` it)."""

    def __init__(self, fake: TwilioFake) -> None:
        super().__init__(fake.app(), "the fake Twilio")
