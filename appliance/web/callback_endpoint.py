"""``/callbacks/{provider}`` as a plain ASGI app, for both ports that take callbacks.

The server's own port puts it in front of its Starlette app (:class:`CallbackLane`),
the report intake's process serves it alone (:mod:`appliance.web.intake_app`). Either
way a callback goes: the request id, the provider's reader, the body under
``[reports] max_callback_bytes`` and the body budget, the signature and the reports
(:func:`appliance.web.callback_check.check`: ``401`` and nothing stored when it is not
the provider's), then the port's ``store`` (the writer on the own port, the link to
the server on the intake's), and only once that says committed, the adapter's answer.
Failing to store is ``503`` with ``Retry-After``, so the provider sends it again.
Refusals are JSON ``{"error", "message"}``; every answer carries ``X-Request-Id`` and
is counted under the route ``/callbacks/{provider}``.

Why not a Starlette route: a report flood is the one load the appliance must take at
the provider's pace, and Starlette's layers (its two error middlewares, the router,
the request and response objects, our two middlewares around them) cost as much CPU
a callback as the signature and the reports together, on the one interpreter lock the
writer needs too. Here they are what a callback needs of them: the request id and
its log context, the metrics, the body budget given back, and an error no handler
turned into an answer made one (a storage error ``503 not_stored``, anything else
``500 internal_error``, logged with its traceback), as
:mod:`appliance.web.last_resort` does for the other routes. Callbacks are never
refused by the in-flight cap, so none is kept here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from starlette.datastructures import URL
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from appliance.disk import is_storage_error
from appliance.logs import note_not_stored, request_id
from appliance.ops.observability.request_middleware import incoming_request_id, new_request_id
from appliance.providers.registry import Providers
from appliance.web.body_budget import BodyBudget, read_scope_pieces
from appliance.web.callback_check import (
    TOO_LARGE,
    TRY_AGAIN,
    Checked,
    check,
    inbound_reader_for,
    reader_for,
    refusal,
)
from appliance.web.errors import ApiError, not_stored

log = logging.getLogger("appliance.callbacks")
PREFIX = "/callbacks/"
ROUTE = "/callbacks/{provider}"
METHODS = ("GET", "POST")
# (status, raw headers, body): an answer as it goes out, before X-Request-Id.
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
# The port's write: True once the callback is committed, False when it was not stored.
Store = Callable[[Checked], Awaitable[bool]]
# Each request once answered: (method, status, seconds).
Observe = Callable[[str, int, float], None]


def provider_in(path: str) -> str | None:
    """The provider's name when ``path`` is ``/callbacks/{provider}`` (the name one path
    segment, as the route's template matches it); None for any other path."""
    if not path.startswith(PREFIX):
        return None
    name = path[len(PREFIX):]
    return name if name and "/" not in name else None


def signed_url(scope: Scope, base: str) -> tuple[str, str]:
    """The callback's URL as the provider signed it (``base`` and the path and query it
    was sent to) and its query string; read from the scope without building a URL
    object when nothing in them needs one."""
    path = str(scope["path"])
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    plain = "?" not in path and "#" not in path and "\\" not in path
    if not (plain and "#" not in query and query.isprintable() and path.isprintable()):
        url = URL(scope=scope)
        path, query = url.path, url.query
    return base + path + (f"?{query}" if query else ""), query


def _response(response: Response) -> Answer:
    return response.status_code, list(response.raw_headers), bytes(response.body)


class CallbackEndpoint:
    """``/callbacks/{provider}`` by ``methods``; any other request it is handed is
    answered ``404`` (another path) or ``405`` (another method)."""

    def __init__(self, providers: Providers, budget: BodyBudget, max_bytes: int,
                 base_url: str, store: Store, observe: Observe,
                 methods: tuple[str, ...] = METHODS) -> None:
        self.methods = methods
        self.providers = providers
        self.budget = budget
        self.max_bytes = max_bytes
        self.base_url = base_url
        self.store = store
        self.observe = observe
        self._answers: dict[tuple[int, bytes, str], Answer] = {}
        self._allow = ", ".join(methods).encode("latin-1")

    def handles(self, scope: Scope) -> bool:
        """Whether ``scope`` is one of this endpoint's requests."""
        return (scope["type"] == "http" and scope["method"] in self.methods
                and provider_in(scope["path"]) is not None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rid = incoming_request_id(scope) or new_request_id()
        token = request_id.set(rid)
        started = time.perf_counter()
        try:
            status, headers, content = await self._answer(scope, receive)
        except ApiError as exc:
            status, headers, content = _response(refusal(exc))
            if status == 405:
                headers.append((b"allow", self._allow))
        except Exception as exc:  # what no check turned into an answer: the last resort
            status, headers, content = self._last_resort(exc)
        finally:
            self.budget.release(scope)
            request_id.reset(token)
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"x-request-id", rid.encode())]})
        await send({"type": "http.response.body", "body": content})
        self.observe(str(scope["method"]), status, time.perf_counter() - started)

    async def _answer(self, scope: Scope, receive: Receive) -> Answer:
        name = provider_in(str(scope["path"]))
        if name is None:
            raise ApiError(404, "not_found", "no such route on this port")
        if scope["method"] not in self.methods:
            raise ApiError(405, "method_not_allowed", f"send {' or '.join(self.methods)}")
        reader = reader_for(self.providers, name)
        pieces = await read_scope_pieces(scope, receive, self.max_bytes, self.budget)
        if pieces is None:
            raise TOO_LARGE
        url, query = signed_url(scope, self.base_url)
        # ASGI header names are lower case already; latin-1 as Starlette decodes them.
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        checked = check(reader, name, str(scope["method"]), url, query, headers,
                        b"".join(pieces), inbound_reader_for(self.providers, name))
        if not await self.store(checked):
            raise TRY_AGAIN
        answer = self._answers.get(checked.answer)
        if answer is None:  # one per adapter's answer: built once
            status, content, media_type = checked.answer
            answer = _response(Response(content, status_code=status, media_type=media_type))
            self._answers[checked.answer] = answer
        return answer

    @staticmethod
    def _last_resort(exc: Exception) -> Answer:
        if is_storage_error(exc):
            note_not_stored(ROUTE, exc)
            return _response(not_stored().response())
        log.exception("unexpected error", extra={"route": ROUTE})
        return _response(refusal(ApiError(
            500, "internal_error",
            "the appliance failed to answer this request; the error is in its log")))


class CallbackLane:
    """The server's app with ``/callbacks/{provider}`` taken by the endpoint ahead of it;
    everything else (lifespan, other paths, other methods) goes to ``app``."""

    def __init__(self, app: ASGIApp, endpoint: CallbackEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.endpoint.handles(scope):
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)
