"""Reading a request body: under a byte limit, within the in-flight budget, watched.

Every route that reads a body (imports, messages, campaigns, console forms, callbacks)
reads it here, so the same rules hold everywhere:

* a ``Content-Length`` over the route's limit is refused before anything is read; a
  body without one is refused at the first piece that crosses the limit;
* all bodies held in memory at once stay under ``[http] max_inflight_body_bytes``
  (EDGE-2): a body's declared ``Content-Length`` is *reserved* before anything is
  read, so twenty uploads that each fit alone but not together are refused ``503``
  with ``Retry-After`` at once, not after seconds of streaming each (a check without
  the reservation let all of them start, since none held anything yet); a body without
  a ``Content-Length`` takes its pieces as they come and is refused at the one that
  crosses. What a request holds or reserved is given back when its answer is sent,
  whatever the exit (:mod:`appliance.web.last_resort`, and the report intake's app);
* a ``watch`` callback sees each piece as it arrives and may refuse the request
  there (the import row limit, decided while the body streams in);
* a client that goes away mid-body is a ``400`` (``408`` when the edge closed it for
  being too slow), never an error traceback.
"""

from __future__ import annotations

from starlette.requests import Request

from appliance.web.body_budget import Watch, declared_in, read_scope_pieces
from appliance.web.parts import parts_of


def declared_length(request: Request) -> int | None:
    """The ``Content-Length`` as a number; None when absent; 400 when not ASCII digits."""
    return declared_in(request.scope)


async def read_bounded(request: Request, limit: int, watch: Watch | None = None) -> bytes | None:
    """The whole body, or ``None`` as soon as it passes ``limit`` bytes.

    What was read is kept on the request, so ``request.form()`` / ``json()`` reuse it.
    """
    pieces = await read_pieces(request, limit, watch)
    if pieces is None:
        return None
    body = b"".join(pieces)
    request._body = body
    return body


async def read_pieces(request: Request, limit: int, watch: Watch | None = None
                      ) -> list[bytes] | None:
    """The body as the pieces it arrived in (not joined: a large body is held once), or
    ``None`` as soon as it passes ``limit`` bytes."""
    budget = parts_of(request).body_budget
    request._stream_consumed = True  # read here from the ASGI channel, not request.stream()
    return await read_scope_pieces(request.scope, request.receive, limit, budget, watch)
