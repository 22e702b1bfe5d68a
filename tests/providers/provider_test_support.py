"""Shared pieces for the provider adapter tests: a fixed clock, callback requests and a
real local HTTP server that plays a provider."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from appliance.config import ProviderSettings
from appliance.provider_kinds import build_adapter
from appliance.providers import CallbackRequest, Outcome, OutgoingMessage, ProviderAdapter

NOW_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
A = TypeVar("A", bound=ProviderAdapter)


def fixed_clock(ms: int = NOW_MS) -> Callable[[], int]:
    return lambda: ms


def changed(base: ProviderSettings, **changes: Any) -> ProviderSettings:
    """``base`` with some options changed (each adapter test file has its own base)."""
    return base.with_keys(**changes)


def adapter_of(kind: type[A], settings: ProviderSettings, now_ms: int = NOW_MS) -> A:
    """The adapter the registry builds for ``settings`` on a fixed clock, checked to be
    the ``kind`` the test is about."""
    built = build_adapter(settings, now_ms=fixed_clock(now_ms))
    assert isinstance(built, kind)
    return built


def message(
    ref: str = "01HF3Z9K2M8Q4R6T7V",
    msisdn: str = "+905321234567",
    body: str = "Your code is 1234",
    callback_url: str = "https://sms.example.org/callbacks/main",
) -> OutgoingMessage:
    return OutgoingMessage(ref=ref, msisdn=msisdn, body=body, callback_url=callback_url)


def callback(
    url: str,
    *,
    method: str = "POST",
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> CallbackRequest:
    """A callback as the HTTP layer hands it over: query taken from the URL."""
    return CallbackRequest(
        method=method,
        url=url,
        query=urlsplit(url).query,
        headers={k.lower(): v for k, v in (headers or {}).items()},
        body=body,
    )


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


class FakeProvider:
    """A provider's HTTP API on 127.0.0.1, in a thread, recording every request.

    ``respond`` turns what arrived into the provider's answer.
    """

    def __init__(self, respond: Callable[[Received], Response]) -> None:
        self.respond = respond
        self.received: list[Received] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]

        async def endpoint(request: Request) -> Response:
            got = Received(
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers={k.lower(): v for k, v in request.headers.items()},
                body=await request.body(),
            )
            self.received.append(got)
            return self.respond(got)

        app = Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake provider did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def send(adapter: ProviderAdapter, msg: OutgoingMessage) -> Outcome:
    """Submit through a real ``httpx.AsyncClient`` and interpret the answer."""

    async def go() -> Outcome:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.send(adapter.build_request(msg))
            return adapter.interpret_response(response)

    return asyncio.run(go())
