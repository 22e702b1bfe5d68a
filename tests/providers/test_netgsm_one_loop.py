"""One loop asks Netgsm both ways (ROUTE-2): a real appliance server, against the fake
Netgsm (written from Netgsm's client library), closes its messages by asking for their
reports and fetches its inbound messages with the puller's loop alone; an inbound poll
Netgsm answers with an error page every time does not stop the status pulls."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.simulator.netgsm_fake import NetgsmFake, RunningFake
from tests.harness import Server, create_account, db_rows, wait_for
from tests.providers.test_netgsm_server import config
from tests.sending.support import send, wait_state

pytestmark = pytest.mark.slow
BOTH = "pull_after_s = 1\npull_rate_per_s = 0.15\ninbound_poll_s = 1\n"


def loops(text: str) -> list[str]:
    """The scheduler loops ``/metrics`` lists."""
    prefix = 'appliance_loop_heartbeat_age_seconds{loop="'
    return sorted(line[len(prefix):].split('"', 1)[0] for line in text.splitlines()
                  if line.startswith(prefix))


def test_the_puller_loop_alone_closes_messages_and_fetches_inbound(
        data_dir: Path, tmp_path: Path) -> None:
    fake = NetgsmFake()
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "one.toml", running.base_url,
                                                extra=BOTH)).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                ref = send(api, "+905321234501", "Merhaba")
                fake.receive("905321234502", "Merhaba, ben")
                done = wait_state(api, ref, "DELIVERED", timeout=60)
                fetched = wait_for(lambda: db_rows(
                    data_dir, "SELECT msisdn, text FROM inbound_messages"), 30,
                    interval=0.2, message="the inbound message fetched")
                metrics = api.get("/metrics").text
        finally:
            server.stop()
    assert done["state"] == "DELIVERED"
    assert fetched == [("+905321234502", "Merhaba, ben")]
    assert fake.requests["report"] >= 1 and fake.requests["receive"] >= 1
    assert "puller" in loops(metrics) and "inbound_poll" not in loops(metrics)


def test_an_inbound_poll_that_keeps_failing_does_not_stop_the_status_pulls(
        data_dir: Path, tmp_path: Path) -> None:
    fake = NetgsmFake()
    fake.answer_next("receive", "<html><body>500 Internal Server Error</body></html>",
                     times=10_000, status=500)
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "fail.toml", running.base_url,
                                                extra=BOTH)).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                # The inbound poll is failing before the messages are even sent...
                wait_for(lambda: fake.requests["receive"] >= 2, 30, interval=0.2,
                         message="two inbound polls answered 500")
                refs = [send(api, f"+90532123450{i}", f"Merhaba {i}") for i in range(2)]
                done = [wait_state(api, ref, "DELIVERED", timeout=60) for ref in refs]
                # ...and goes on failing, at its own pace, while they are asked about.
                polls = fake.requests["receive"]
                wait_for(lambda: fake.requests["receive"] > polls, 30, interval=0.2,
                         message="the inbound poll still going")
        finally:
            server.stop()
    assert [d["state"] for d in done] == ["DELIVERED", "DELIVERED"]
    assert fake.requests["report"] >= 1
    assert db_rows(data_dir, "SELECT count(*) FROM inbound_messages") == [(0,)]
    kept = db_rows(data_dir, "SELECT count(*) FROM raw_inbound WHERE parsed = 0")
    assert kept[0][0] >= 2  # each failed answer kept raw, nothing filed from it
