"""Reading a request the same way on every route: its body under a byte limit, a JSON
object, its ``Idempotency-Key``, and who acts (for the audit).

Each refusal is the API's JSON error (``413 payload_too_large``,
``415 unsupported_media_type``, ``400 invalid_idempotency_key``, and the strict JSON
parser's own: :mod:`appliance.web.json_body`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from appliance.accounts import SHOWN_PREFIX
from appliance.imports.accept import too_large
from appliance.refusals import Refused
from appliance.web.bodies import read_bounded
from appliance.web.bodies import read_pieces as read_body_pieces
from appliance.web.body_budget import Watch
from appliance.web.errors import ApiError, api_error
from appliance.web.json_body import parse_json_object

MAX_IDEMPOTENCY_KEY = 200


def payload_too_large(limit: int) -> ApiError:
    """``413``: the body passed ``limit`` bytes."""
    return api_error(too_large(limit))


async def read_limited(request: Request, limit: int, watch: Watch | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` bytes."""
    try:
        body = await read_bounded(request, limit, watch)
    except Refused as exc:
        raise api_error(exc) from None
    if body is None:
        raise payload_too_large(limit)
    return body


async def read_pieces(request: Request, limit: int, watch: Watch) -> list[bytes] | None:
    """The request body as it came, in pieces (``None``: it passed ``limit``)."""
    try:
        return await read_body_pieces(request, limit, watch)
    except Refused as exc:
        raise api_error(exc) from None


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    """An ``application/json`` body of at most ``limit`` bytes holding one object."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, "unsupported_media_type", "send application/json")
    return parse_json_object(await read_limited(request, limit))


def idempotency_key(request: Request) -> str | None:
    """The ``Idempotency-Key`` header: 1 to :data:`MAX_IDEMPOTENCY_KEY` printable
    characters, or absent (``None``)."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise ApiError(400, "invalid_idempotency_key",
                       f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters")
    return key


def request_actor(request: Request) -> str:
    """Who acts, for the audit: the API key by the prefix it is listed under."""
    key = request.headers.get("authorization", "").partition(" ")[2].strip()
    return f"API key {key[:SHOWN_PREFIX]}"
