"""Every HTTP client the appliance opens, so every outgoing request says who sends it.

Provider submissions, alert webhooks, the simulator's receipts and the demo's own
calls all go through :func:`async_client` or :func:`client`, which send
``User-Agent: appliance/<version>``. A request built apart and handed to
``client.send()`` (how the sender submits an adapter's request) does not get a
client's default headers in httpx, so a request hook stamps it too, unless the
request already names its own User-Agent.
"""

from __future__ import annotations

from typing import Any

import httpx

from appliance import __version__

USER_AGENT = f"appliance/{__version__}"


def _stamp(request: httpx.Request) -> None:
    if "user-agent" not in request.headers:
        request.headers["User-Agent"] = USER_AGENT


async def _stamp_async(request: httpx.Request) -> None:
    _stamp(request)


def async_client(**kwargs: Any) -> httpx.AsyncClient:
    """``httpx.AsyncClient(**kwargs)`` that sends the appliance's User-Agent."""
    headers = httpx.Headers(kwargs.pop("headers", None))
    headers.setdefault("User-Agent", USER_AGENT)
    return httpx.AsyncClient(headers=headers, event_hooks={"request": [_stamp_async]},
                             **kwargs)


def client(**kwargs: Any) -> httpx.Client:
    """``httpx.Client(**kwargs)`` that sends the appliance's User-Agent."""
    headers = httpx.Headers(kwargs.pop("headers", None))
    headers.setdefault("User-Agent", USER_AGENT)
    return httpx.Client(headers=headers, event_hooks={"request": [_stamp]}, **kwargs)
