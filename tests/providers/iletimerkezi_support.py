"""Shared pieces for the İletimerkezi tests: the adapter built from a table, and requests
carried for real (``httpx``) to the fake written from İletimerkezi's documentation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx

from appliance.config import ProviderSettings
from appliance.providers import CallbackRequest, Outcome, OutgoingMessage
from appliance.providers.iletimerkezi import IletimerkeziAdapter
from appliance.providers.status_query import PullAnswer, PullTarget
from appliance.simulator.iletimerkezi_fake import FakeServer
from tests.providers.provider_test_support import NOW_MS, adapter_of

KEY = "demo-key"
HASH = "demo-hash"
SENDER = "APITEST"


def settings(base_url: str = "https://api.iletimerkezi.com/v1", **keys: Any
             ) -> ProviderSettings:
    table: dict[str, Any] = {"key": KEY, "hash": HASH, "sender": SENDER, **keys}
    return ProviderSettings(name="im", kind="iletimerkezi", base_url=base_url, **table)


def adapter(base_url: str = "https://api.iletimerkezi.com/v1", **keys: Any
            ) -> IletimerkeziAdapter:
    return adapter_of(IletimerkeziAdapter, settings(base_url, **keys))


def msg(n: int, msisdn: str | None = None, body: str = "Kodunuz 1234") -> OutgoingMessage:
    return OutgoingMessage(ref=f"REF{n:04d}", msisdn=msisdn or f"+9053212345{n:02d}",
                           body=body, callback_url="https://sms.example.org/callbacks/im")


def carry(request: httpx.Request) -> httpx.Response:
    """``request`` sent for real; the answer read whole."""

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.send(request)
            await response.aread()
            return response

    return asyncio.run(go())


def send_one(wire: IletimerkeziAdapter, m: OutgoingMessage) -> Outcome:
    return wire.interpret_response(carry(wire.build_request(m)))


def send_many(wire: IletimerkeziAdapter, msgs: Sequence[OutgoingMessage]) -> list[Outcome]:
    return wire.interpret_batch_response(msgs, carry(wire.build_batch_request(msgs)))


def ask(wire: IletimerkeziAdapter, targets: Sequence[PullTarget]) -> PullAnswer:
    """A status request carried for real; its answer read as the puller stores it."""
    request = wire.build_status_request(targets)
    response = carry(request)
    stored = CallbackRequest(method="PULL", url=str(request.url), query="",
                             headers={"content-type": response.headers.get(
                                 "content-type", "")}, body=response.content)
    return wire.read_status_answer(targets, response.status_code, stored)


def target(m: OutgoingMessage, provider_msg_id: str | None) -> PullTarget:
    return PullTarget(ref=m.ref, provider_msg_id=provider_msg_id, msisdn=m.msisdn,
                      submitted_at_ms=NOW_MS)


def script(fake: FakeServer, endpoint: str, *answers: dict[str, Any]) -> None:
    httpx.post(f"{fake.url}/_fake/script", json={"endpoint": endpoint,
               "answers": list(answers)}, timeout=10).raise_for_status()


def set_status(fake: FakeServer, order: str, number: str, status: int) -> dict[str, Any]:
    r = httpx.post(f"{fake.url}/_fake/status", json={"order": order, "number": number,
                   "status": status}, timeout=10)
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def fake_state(fake: FakeServer) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{fake.url}/_fake/state", timeout=10).json()
    return data


def last_body(fake: FakeServer) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(fake_state(fake)["received"][-1]["body"])
    return body
