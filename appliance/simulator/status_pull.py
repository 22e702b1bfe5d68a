"""The simulated provider's status query (ROUTE-2): ``GET /sms/status``.

Vonage's SMS API has no per-message status request, so this is the simulator's own,
kept close to Vonage's receipts so that a pulled report and a pushed one are the same
fact (``appliance.providers.simulator_kind`` reads it):

``GET /sms/status?ref=REF&ref=REF...`` (1 to :data:`MAX_REFS` client-refs), with
``Authorization: Basic base64(api_key:api_secret)`` (else ``401``). The answer::

    {"count": N, "items": [{"client-ref": REF, "state": "reported" | "pending" | "unknown",
                            "receipts": [{...}, ...]}]}

one item per ref asked about: ``unknown`` for a ref never submitted, ``pending`` while
the provider has no final word (a silent message stays so), ``reported`` with one
receipt per part, each with exactly the fields (and times) of the delivery receipt the
simulator pushes for it, unsigned (the request itself was authenticated).

Test hooks: ``POST /_sim/pull_script`` with a JSON list of steps for the next status
requests: ``{"answer": "html"}`` (an HTML error page with ``200``), ``{"answer":
"truncated"}`` (the JSON answer cut in half), ``{"answer": "unknown_code"}`` (every
item's ``state`` a word not documented above), ``{"items": [...]}`` (exactly these
items), ``{"http": 503}``, ``{"hang_s": 5}`` (answer that late). ``POST /_sim/push_now``
with ``{"refs": [...]}`` pushes those refs' final receipts now (signed, as pushed
receipts are), whether or not they were pushed before: the answer says how many were
taken. ``GET /_sim/stats`` counts ``pull_requests`` and each ref's ``pulls``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from appliance.simulator.behaviour import Behaviour
from appliance.simulator.receipts import Receipt, ReceiptPush, RefStats

MAX_REFS = 100
_HTML = (b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
         b"<body><h1>Bad Gateway</h1></body></html>")


class StatusDesk:
    """Answers status requests from what the server recorded per ref."""

    def __init__(self, behaviour: Behaviour, refs: dict[str, RefStats],
                 receipts: ReceiptPush) -> None:
        self.behaviour = behaviour
        self.refs = refs
        self.receipts = receipts
        self.script: list[dict[str, Any]] = []
        self.requests = 0
        self.refs_asked = 0

    def _authorised(self, request: Request) -> bool:
        b = self.behaviour
        want = base64.b64encode(f"{b.api_key}:{b.api_secret}".encode()).decode()
        return request.headers.get("authorization", "") == f"Basic {want}"

    def item(self, ref: str, now: float) -> dict[str, Any]:
        stats = self.refs.get(ref)
        if stats is None or not stats.accepted:
            return {"client-ref": ref, "state": "unknown", "receipts": []}
        stats.pulls += 1
        if not stats.pull_receipts or now < stats.known_at:
            return {"client-ref": ref, "state": "pending", "receipts": []}
        receipts = [{k: v for k, v in r.items() if k != "sig"} for r in stats.pull_receipts]
        return {"client-ref": ref, "state": "reported", "receipts": receipts}

    async def status(self, request: Request) -> Response:
        self.requests += 1
        if not self._authorised(request):
            return JSONResponse({"error": "Bad Credentials"}, status_code=401)
        refs = request.query_params.getlist("ref")
        if not 1 <= len(refs) <= MAX_REFS:
            return JSONResponse({"error": f"give 1 to {MAX_REFS} ref parameters"},
                                status_code=400)
        self.refs_asked += len(refs)
        step = self.script.pop(0) if self.script else {}
        if "hang_s" in step:
            await asyncio.sleep(float(step["hang_s"]))
        if "http" in step:
            return JSONResponse({"error": f"scripted {step['http']}"},
                                status_code=int(step["http"]))
        now = time.time()
        items = [self.item(ref, now) for ref in refs]
        answer = step.get("answer")
        if isinstance(step.get("items"), list):
            items = step["items"]
        if answer == "html":
            return Response(_HTML, media_type="text/html")
        if answer == "unknown_code":
            items = [{**i, "state": "zzz-not-documented"} for i in items]
        body = json.dumps({"count": len(items), "items": items}).encode()
        if answer == "truncated":
            body = body[:len(body) // 2]
        return Response(body, media_type="application/json")

    async def set_script(self, request: Request) -> Response:
        try:
            steps = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            return JSONResponse({"error": "want a JSON list of objects"}, status_code=400)
        self.script.extend(steps)
        return JSONResponse({"queued": len(self.script)})

    async def push_now(self, request: Request) -> Response:
        try:
            data = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        refs = data.get("refs") if isinstance(data, dict) else None
        if not isinstance(refs, list):
            return JSONResponse({"error": 'want {"refs": [...]}'}, status_code=400)
        wanted = [(ref, self.refs[ref]) for ref in refs if ref in self.refs]
        pushes = [self.receipts.push(Receipt(stats.callback, params, ref, final=True),
                                     inline=True)
                  for ref, stats in wanted if stats.callback for params in stats.pull_receipts]
        taken = await asyncio.gather(*pushes)
        return JSONResponse({"pushed": len(taken), "taken": sum(1 for t in taken if t)})
