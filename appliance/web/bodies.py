"""Reading a request body under a byte limit, decided while it streams in."""

from __future__ import annotations

from starlette.requests import Request


async def read_bounded(request: Request, limit: int) -> bytes | None:
    """The whole body, or ``None`` as soon as it passes ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before anything is read; a body
    without one is refused at the first piece that crosses the limit. What was read
    is kept on the request, so ``request.form()`` / ``json()`` reuse it.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > limit:
            return None
        parts.append(piece)
    body = b"".join(parts)
    request._body = body
    return body
