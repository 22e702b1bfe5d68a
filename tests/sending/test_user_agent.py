"""Every outgoing request says who sends it: ``User-Agent: appliance/<version>``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from starlette.responses import JSONResponse, Response

from appliance import __version__
from appliance.outgoing_http import USER_AGENT, async_client, client
from tests.harness import Server, create_account, wait_for
from tests.providers.provider_test_support import FakeProvider, Received
from tests.sending.support import send

EXPECTED = f"appliance/{__version__}"


def vonage_answer(got: Received) -> Response:
    return JSONResponse({"message-count": "1", "messages": [
        {"to": "905321234567", "message-id": "0A0000001234567B", "status": "0",
         "remaining-balance": "3.14", "message-price": "0.0333", "network": "28601"}]})


def test_a_provider_submission_carries_the_user_agent(data_dir: Path, tmp_path: Path) -> None:
    with FakeProvider(vonage_answer) as fake:
        config = tmp_path / "appliance.toml"
        config.write_text(f"""[providers.vg]
kind = "vonage"
base_url = "{fake.base_url}"
api_key = "abcd1234"
api_secret = "s3cr3t"
""")
        server = Server(data_dir, config=config).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                send(api, "+905321234567", "hello")
            wait_for(lambda: fake.received or None, timeout=20, message="the submission")
        finally:
            server.stop()
    [got] = fake.received
    assert got.path == "/sms/json"
    assert got.headers["user-agent"] == EXPECTED


def test_clients_stamp_requests_built_apart_and_keep_one_given() -> None:
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("user-agent", ""))
        return httpx.Response(204)

    transport = httpx.MockTransport(record)
    with client(transport=transport) as sync:
        sync.send(httpx.Request("POST", "http://provider.test/sms", data={"a": "1"}))
        sync.get("http://provider.test/x")
        sync.send(httpx.Request("GET", "http://provider.test/y",
                                headers={"User-Agent": "custom/1"}))

    async def go() -> None:
        async with async_client(transport=transport, timeout=5.0) as aclient:
            await aclient.send(httpx.Request("POST", "http://provider.test/sms"))
            await aclient.post("http://hooks.test/alert", json={"name": "x"})

    asyncio.run(go())
    assert USER_AGENT == EXPECTED
    assert seen == [EXPECTED, EXPECTED, "custom/1", EXPECTED, EXPECTED]
