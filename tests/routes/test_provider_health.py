"""Lowering a provider whose live delivery falls, and its recovery (ROUTE-3).

Provider ``a`` is a simulator that takes every message and reports none (``--no-push``,
and ``pull = false``): its messages are not delivered within
``health_deliver_within_s``, so it is lowered, ``/metrics`` and the dashboard say so,
and its route sends new messages to ``b`` but for the trickle (1 in
``health_trickle``). Then ``a`` is started again on the same port, reporting: the
trickle's messages are delivered in time, the undelivered ones leave the window, and
``a`` is restored. Windows are seconds long here (settings), so the test is quick.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.harness import Server, create_account, wait_for
from tests.routes.support import metric_values, route_config, send
from tests.sending.support import SimulatorProcess, message, wait_state
from tests.web.console_support import create_user, page_token, sign_in

HEALTH = """health_window_s = 4.0
health_deliver_within_s = 1.5
health_min_messages = 5
health_trickle = 4"""


def lowered(api: httpx.Client) -> float | None:
    return metric_values(api, "appliance_provider_lowered").get('{provider="a"}')


@pytest.mark.usefixtures("backend")
@pytest.mark.slow
def test_a_provider_that_stops_reporting_deliveries_is_lowered_then_restored(
        tmp_path: Path) -> None:
    a = SimulatorProcess(tmp_path, "--no-push").start()
    b = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    config = route_config(tmp_path / "cfg.toml", a.url, b.url, sending=HEALTH,
                          a_extra="pull = false")
    server = Server(data, config=config).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            assert lowered(api) == 0.0
            first = [send(api, f"+90532124{i:04d}") for i in range(8)]
            for ref in first:
                assert wait_state(api, ref, "SUBMITTED")["provider"] == "a"
            wait_for(lambda: lowered(api) == 1.0, 60, interval=0.1,
                     message="a lowered: its messages are not delivered")
            assert "provider a lowered: " in server.log()
            create_user(data, account="acme")
            with sign_in(server) as console:
                shown = console.get("/dashboard/figures").text
                assert 'data-provider="a"' in shown and 'data-lowered="yes"' in shown
            # Lowered: its route sends to b first, but for the trickle (1 in 4).
            later = [send(api, f"+90532125{i:04d}") for i in range(40)]
            where = [message(api, r)["provider"] for r in later]
            assert 1 <= where.count("a") <= 20 and where.count("b") >= 20, where
            assert all(message(api, r)["route"] == "+90" for r in later)
            # a reports again: the trickle's messages are delivered in time, the old
            # ones leave the window, and a comes back.
            a.stop()
            a = SimulatorProcess(tmp_path, port=a.port).start()

            def restored() -> bool:
                send(api, "+905321260000")  # keeps a trickle going meanwhile
                return lowered(api) == 0.0

            wait_for(restored, 90, interval=0.3, message="a restored")
            assert "provider a restored" in server.log()
            back = [send(api, f"+90532127{i:04d}") for i in range(3)]
            assert [message(api, r)["provider"] for r in back] == ["a", "a", "a"]
            # The console sends by route too when no provider is chosen.
            with sign_in(server) as console:
                page_text = console.get("/send").text
                assert '<option value="" selected>by its route' in page_text
                keys = re.findall(r'name="send_key" value="([^"]+)"', page_text)
                sent = console.post("/send/message", data={
                    "csrf_token": page_token(console, "/send"), "send_key": keys[0],
                    "to": "+905321280000", "body": "from the console", "provider": ""})
                assert sent.status_code == 303, sent.text
            ref = sent.headers["location"].split("q=")[1].split("&")[0]
            m = message(api, ref)
            assert m["provider"] == "a" and m["route"] == "+90", m
    finally:
        server.stop()
        a.stop()
        b.stop()
