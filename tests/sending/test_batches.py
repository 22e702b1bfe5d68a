"""Many messages a request, for the kinds that take them (ROUTE-1).

The built-in simulator with ``batch = true`` takes up to ``batch_max`` numbers of one
text in one ``POST /sms/batch`` and answers each as one submission; the sender gives a
request only messages of the same text (after personalisation) and encoding, marks
them ``SENDING`` together just before it goes, and records one outcome per message. A
kill with a batch in flight leaves that batch, and only it, ``UNCERTAIN``: never sent
again.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.config import ProviderSettings
from appliance.providers.base import OutgoingMessage, SubmitResult
from appliance.providers.batch import batch_wire_of
from appliance.providers.kind import BuildContext
from appliance.providers.simulator_kind import KIND, SimulatorBatchAdapter
from tests.harness import Server, create_account, db_rows, wait_for
from tests.sending.support import SimulatorProcess
from tests.sending.support_campaigns import campaign, import_list

SENT = ("SUBMITTED", "DELIVERED", "FAILED", "EXPIRED")


def batch_config(path: Path, base_url: str, batch_max: int, concurrency: int) -> Path:
    path.write_text(f"""
[sending]
submit_timeout_s = 60.0

[providers.sim]
kind = "simulator"
base_url = "{base_url}"
rate_per_s = 500
concurrency = {concurrency}
batch = true
batch_max = {batch_max}
""")
    return path


def rows(data: Path) -> dict[str, tuple[str, int, str | None]]:
    return {str(r[0]): (str(r[1]), int(r[2]), r[3]) for r in db_rows(
        data, "SELECT ref, state, attempts, error FROM messages")}


def test_the_simulator_kind_sends_many_a_request_only_when_asked() -> None:
    ctx = BuildContext(submit_timeout_s=5.0)
    one = KIND.build(ProviderSettings(name="s", kind="simulator"), ctx)
    many = KIND.build(ProviderSettings(name="s", kind="simulator", batch=True, batch_max=7),
                      ctx)
    assert one.transport.batch_max == 1
    assert many.transport.batch_max == 7
    wire = SimulatorBatchAdapter(ProviderSettings(name="s", kind="simulator"))
    msgs = [OutgoingMessage(ref=f"R{i}", msisdn=f"+90532000000{i}", body="hi",
                            callback_url="http://x/cb") for i in range(3)]
    assert batch_wire_of(wire) is wire
    request = wire.build_batch_request(msgs)
    assert request.url.path == "/sms/batch"
    entry: dict[str, Any] = {"message-count": "1", "messages": [
        {"to": "1", "status": "0", "message-id": "ID"}]}
    refused: dict[str, Any] = {"message-count": "1", "messages": [
        {"to": "1", "status": "3", "error-text": "bad"}]}
    answer = httpx.Response(200, json={"results": [entry, refused, entry]})
    outcomes = wire.interpret_batch_response(msgs, answer)
    assert [o.result for o in outcomes] == [SubmitResult.ACCEPTED, SubmitResult.REJECTED,
                                           SubmitResult.ACCEPTED]
    # An answer naming fewer messages than were sent: every one UNCERTAIN.
    short = httpx.Response(200, json={"results": [entry]})
    assert {o.result for o in wire.interpret_batch_response(msgs, short)} == {
        SubmitResult.UNCERTAIN}
    # A whole request refused at once: every message alike.
    busy = httpx.Response(429, headers={"Retry-After": "3"}, json={})
    assert {o.result for o in wire.interpret_batch_response(msgs, busy)} == {
        SubmitResult.RETRY}


@pytest.mark.usefixtures("backend")
def test_a_campaign_goes_out_in_as_few_requests_as_batch_max_allows(tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    count, batch_max = 25, 10
    server = Server(data, config=batch_config(tmp_path / "cfg.toml", sim.url, batch_max,
                                              concurrency=2)).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            import_list(api, "k", count)
            campaign(api, "k", body="same text for all")
            wait_for(lambda: len(rows(data)) == count and all(
                s in SENT for s, _, _ in rows(data).values()), 60, interval=0.2,
                message="every message sent")
            stats = sim.stats()
            assert stats["batch_requests"] == math.ceil(count / batch_max), stats["batch_sizes"]
            assert sorted(stats["batch_sizes"]) == [5, 10, 10]
            assert stats["requests"] == stats["batch_requests"]
            refs = stats["refs"]
            assert all(refs[r]["received"] == 1 for r in rows(data))
            assert all(attempts == 1 for _, attempts, _ in rows(data).values())
            # Texts that differ after personalisation never share a request.
            import_list(api, "named", 4, prefix="+90533",
                        names=["Ada", "Bo", "Ada", "Cy"])
            campaign(api, "named", body="hi {name}")
            wait_for(lambda: len(rows(data)) == count + 4 and all(
                s in SENT for s, _, _ in rows(data).values()), 60, interval=0.2,
                message="the personalised campaign sent")
            after = sim.stats()
            added = after["batch_sizes"][len(stats["batch_sizes"]):]
            singles = after["requests"] - after["batch_requests"] - (
                stats["requests"] - stats["batch_requests"])
            assert sorted(added) == [2] and singles == 2, after["batch_sizes"]
    finally:
        server.stop()
        sim.stop()


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_kill9_with_a_batch_in_flight_leaves_only_that_batch_uncertain(
        tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    count, batch_max = 25, 10
    server = Server(data, config=batch_config(tmp_path / "cfg.toml", sim.url, batch_max,
                                              concurrency=1)).start()
    try:
        key = create_account(data, "acme")
        # The first request's numbers are taken one by one; the last of them hangs, so
        # the request is in flight with all ten at the provider.
        sim.script([{}] * (batch_max - 1) + [{"hang_s": 30, "silent": True}])
        with server.client(key) as api:
            import_list(api, "k", count)
            campaign(api, "k", body="one text")
            wait_for(lambda: sim.stats()["submissions"] == batch_max, 60, interval=0.1,
                     message="the first batch at the provider")
            before = rows(data)
            in_flight = {r for r, (s, _, _) in before.items() if s == "SENDING"}
            assert len(in_flight) == batch_max, before
        server.kill9()
        server.restart()
        with server.client(key) as api:
            rest = set(before) - in_flight
            wait_for(lambda: all(rows(data)[r][0] in SENT for r in rest), 60, interval=0.2,
                     message="the messages that never left sent after the restart")
            after = rows(data)
            # Only the batch in flight is UNCERTAIN (or settled since by its reports,
            # which the provider pushes again once the server is back): never resent.
            uncertain = {r for r, (s, _, _) in after.items() if s == "UNCERTAIN"}
            assert uncertain <= in_flight
            assert all(after[r][0] in ("UNCERTAIN", *SENT) for r in in_flight), after
            refs = sim.stats()["refs"]
            assert all(refs[r]["received"] == 1 for r in after), refs
            assert sim.stats()["batch_sizes"] == [10, 10, 5]
    finally:
        server.stop()
        sim.stop()
