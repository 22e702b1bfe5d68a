"""JSON error answers with one shape: ``{"error": code, "message": text, ...}``."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from appliance.refusals import (
    Conflict,
    Gone,
    Invalid,
    Malformed,
    NotFound,
    Refused,
    TooLarge,
    TooMany,
    Unavailable,
)

STORAGE_RETRY_AFTER_S = 30
# The status the API answers for each kind of refusal the use cases raise.
REFUSAL_STATUS: dict[type[Refused], int] = {
    Malformed: 400, NotFound: 404, Conflict: 409, Gone: 410, TooLarge: 413, Invalid: 422,
    TooMany: 429, Unavailable: 503,
}


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, *,
                 retry_after: int | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.retry_after = retry_after
        self.extra = extra

    def response(self) -> JSONResponse:
        body = {"error": self.error, "message": self.message, **self.extra}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
        return JSONResponse(body, status_code=self.status, headers=headers or None)


def refusal_status(exc: Refused) -> int:
    """The HTTP status of a refusal: its kind's (422 for a kind not listed)."""
    return next((status for kind, status in REFUSAL_STATUS.items() if isinstance(exc, kind)),
                422)


def api_error(exc: Refused) -> ApiError:
    """A use case's refusal as the API's JSON error: the same code, message and facts."""
    status = refusal_status(exc)
    retry_after = (exc.retry_after_s if isinstance(exc, TooMany)
                   else STORAGE_RETRY_AFTER_S if status == 503 else None)
    return ApiError(status, exc.error, exc.message, **exc.extra, retry_after=retry_after)


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"no such {what}")


def not_stored() -> ApiError:
    """A write the disk did not take (full, or failing): nothing was stored (EDGE-4)."""
    return ApiError(503, "not_stored", "the appliance could not store this (the disk is full"
                    " or failing); nothing was stored: send it again later",
                    retry_after=STORAGE_RETRY_AFTER_S)


def storage_full(message: str) -> ApiError:
    """Refused before writing: free space is under ``[storage] min_free_bytes``."""
    return ApiError(503, "storage_full", message, retry_after=STORAGE_RETRY_AFTER_S)


def ascii_int(raw: object, max_digits: int = 18) -> int | None:
    """A non-negative integer written in ASCII digits (at most ``max_digits``), else
    ``None``: ``²``, ``١`` and ``１`` pass ``str.isdigit()`` but are no numbers here."""
    if not isinstance(raw, str) or not raw or len(raw) > max_digits:
        return None
    if not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


def path_id(raw: str, what: str, max_digits: int = 18) -> int:
    """An id from a URL path: ASCII digits only (``²``, ``١``, ``１`` are no ids: 404)."""
    found = ascii_int(raw, max_digits)
    if found is None:
        raise not_found(what)
    return found
