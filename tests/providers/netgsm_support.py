"""Shared pieces of the Netgsm tests: the adapter over a running fake Netgsm (written
from Netgsm's client library, not from ours), and one exchange with it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import httpx

from appliance.config import ProviderSettings
from appliance.providers import CallbackRequest, OutgoingMessage
from appliance.providers.netgsm import NetgsmAdapter
from appliance.simulator.netgsm_fake import NetgsmFake, RunningFake
from tests.providers.provider_test_support import adapter_of, changed, message

USERCODE = "8503001234"
PASSWORD = "api-pass-1"


def settings(base_url: str, **changes: object) -> ProviderSettings:
    base = ProviderSettings(name="ng", kind="netgsm", base_url=base_url, sender="BASLIGIM",
                            usercode=USERCODE, password=PASSWORD)
    return changed(base, **changes)


def adapter(base_url: str = "https://api.netgsm.com.tr", **changes: object) -> NetgsmAdapter:
    return adapter_of(NetgsmAdapter, settings(base_url, **changes))


def exchange(request: httpx.Request) -> httpx.Response:
    """``request`` carried to the fake; the answer keeps the request, as the transport's."""
    with httpx.Client(timeout=10) as client:
        response = client.send(request)
        response.read()
        return response


def stored(request: httpx.Request, response: httpx.Response) -> CallbackRequest:
    """An answer as the puller stores it raw (``method = "PULL"``)."""
    return CallbackRequest(method="PULL", url=str(request.url), query=request.url.query.decode(),
                           headers=dict(response.headers), body=response.content)


def batch(n: int = 3, body: str = "Kampanya başladı", first: int = 0) -> list[OutgoingMessage]:
    return [replace(message(ref=f"REF{i:03d}", msisdn=f"+90532123450{i}", body=body),
                    encoding="GSM-7 Turkish") for i in range(first, first + n)]


class Rig:
    """A running fake Netgsm and the adapter pointed at it."""

    def __init__(self, fake: NetgsmFake, running: RunningFake) -> None:
        self.fake = fake
        self.running = running

    def adapter(self, **changes: object) -> NetgsmAdapter:
        return adapter(self.running.base_url, **changes)


def running_rig() -> Iterator[Rig]:
    """For each test file's ``rig`` fixture: a fresh fake account, served meanwhile."""
    fake = NetgsmFake()
    with RunningFake(fake) as running:
        yield Rig(fake, running)
