"""Around every request: the in-flight cap, the body budget, and the last resort.

* **In-flight cap**: at most :data:`MAX_IN_FLIGHT` requests are handled at once;
  past it a request is answered ``503 {"error": "server_busy"}`` with
  ``Retry-After``. Only requests the application is handling count (connections
  still sending their headers do not: :mod:`appliance.web.edge`), and ``/healthz``,
  ``/readyz``, ``/metrics`` and ``/callbacks/*`` are never refused by it, so a flood
  of slow requests cannot silence the health checks or stop reports being stored.
* **Body budget**: what a request's body took from ``[http] max_inflight_body_bytes``
  (:mod:`appliance.web.bodies`) is given back when it is answered.
* **Last resort**: an exception no handler turned into an answer becomes a JSON
  answer: a storage error (disk full or failing, see :mod:`appliance.disk`)
  is ``503 {"error": "not_stored"}`` with ``Retry-After``, since its write unit was
  rolled back (logged as a sampled line per route, :data:`appliance.logs.NOT_STORED`:
  on a full disk every write is refused); anything else is logged once, with its
  traceback, and answered ``500 {"error": "internal_error"}``. No input is meant to
  get here: the fuzz test over every route checks that none does. A client that went
  away mid-request needs no answer and logs nothing.
"""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from appliance.disk import is_storage_error
from appliance.logs import note_not_stored
from appliance.web.body_budget import BodyBudget
from appliance.web.errors import not_stored

log = logging.getLogger("appliance.http")
MAX_IN_FLIGHT = 2000
BUSY_RETRY_AFTER_S = 1
NEVER_REFUSED = ("/healthz", "/readyz", "/metrics", "/callbacks/")


class LastResort:
    def __init__(self, app: ASGIApp, budget: BodyBudget,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.app = app
        self.budget = budget
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.refused_busy = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        counted = not str(scope.get("path", "")).startswith(NEVER_REFUSED)
        if counted and self.in_flight >= self.max_in_flight:
            self.refused_busy += 1
            busy = JSONResponse({"error": "server_busy",
                                 "message": "too many requests at once; retry in a moment"},
                                status_code=503, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)})
            await busy(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        if counted:
            self.in_flight += 1
        try:
            await self.app(scope, receive, sending)
        except ClientDisconnect:
            pass
        except Exception as exc:
            answer = self._answer(scope, exc)
            if not started:
                await answer(scope, receive, send)
        finally:
            if counted:
                self.in_flight -= 1
            self.budget.release(scope)

    @staticmethod
    def _answer(scope: Scope, exc: Exception) -> Response:
        route = str(getattr(scope.get("route"), "path", "") or "unmatched")
        if is_storage_error(exc):
            note_not_stored(route, exc)
            return not_stored().response()
        log.exception("unexpected error", extra={"route": route})
        return JSONResponse({"error": "internal_error",
                             "message": "the appliance failed to answer this request; the"
                                        " error is in its log"}, status_code=500)
