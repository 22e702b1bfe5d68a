"""JSON error answers with one shape: ``{"error": code, "message": text, ...}``."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.extra = extra

    def response(self) -> JSONResponse:
        body = {"error": self.error, "message": self.message, **self.extra}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"no such {what}")
