"""The in-flight budget of request bodies (EDGE-2), and reading a body within it.

One budget per process, made by the composition root; :func:`read_scope_pieces`
reads a plain ASGI body against it (the server's routes through
:mod:`appliance.web.bodies`, the report intake's process directly), and
:mod:`appliance.web.last_resort` gives back what an answered request held.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from starlette.types import Receive, Scope

from appliance.web.edge import TIMED_OUT
from appliance.web.errors import ApiError

HELD = "appliance.body_bytes_held"
BUSY_RETRY_AFTER_S = 2
Watch = Callable[[bytes], None]


class BodyBudget:
    """Bytes of request bodies held in memory right now, against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.refused = 0

    def fits(self, size: int) -> bool:
        return self.held + size <= self.limit

    def take(self, scope: MutableMapping[str, Any], size: int) -> bool:
        """Hold ``size`` more bytes for the request of ``scope`` (a declared length
        reserved up front, or a piece of a body that declared none); False, counted as a
        refusal, when that would cross the limit. :meth:`release` gives it all back."""
        if self.held + size > self.limit:
            self.refused += 1
            return False
        self.held += size
        scope[HELD] = scope.get(HELD, 0) + size
        return True

    def release(self, scope: MutableMapping[str, Any]) -> None:
        self.held -= scope.pop(HELD, 0)


def busy() -> ApiError:
    return ApiError(503, "server_busy", "too many request bodies are being received at once;"
                    " send it again in a moment", retry_after=BUSY_RETRY_AFTER_S)


def declared_in(scope: Scope) -> int | None:
    """:func:`declared_length`, read from the ASGI scope's headers."""
    declared: str | None = None
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            declared = value.decode("latin-1")
            break
    if declared is None:
        return None
    declared = declared.strip()
    if not declared.isascii() or not declared.isdigit() or len(declared) > 18:
        raise ApiError(400, "bad_request", "Content-Length is not a number")
    return int(declared)


async def read_scope_pieces(scope: Scope, receive: Receive, limit: int,
                            budget: BodyBudget | None, watch: Watch | None = None
                            ) -> list[bytes] | None:
    """:func:`read_pieces` for a plain ASGI app: the scope, its ``receive`` and the
    budget bodies are held against."""
    declared = declared_in(scope)
    if declared is not None and declared > limit:
        return None
    reserved = 0  # bytes of the budget this read took before the first piece
    if budget is not None and declared is not None:
        if not budget.take(scope, declared):
            raise busy()
        reserved = declared
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if scope.get(TIMED_OUT):
                raise ApiError(408, "request_timeout",
                               "the request body stopped arriving or arrived too slowly")
            raise ApiError(400, "client_disconnected",
                           "the connection closed before the whole body arrived")
        piece = message.get("body", b"")
        if piece:
            size += len(piece)
            if size > limit:
                return None
            beyond = min(len(piece), size - reserved)  # what the reservation does not cover
            if budget is not None and beyond > 0 and not budget.take(scope, beyond):
                raise busy()
            if watch is not None:
                watch(piece)
            parts.append(piece)
        if not message.get("more_body", False):
            return parts
