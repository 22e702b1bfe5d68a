"""Suppressed numbers are never submitted: a campaign over a list where some numbers are
suppressed before it starts and some after its messages were queued. The provider (the
simulator, in its own process, counting what reaches it) never sees any of them; their
messages are CANCELLED and counted, and the campaign's counts add up to its total."""

from __future__ import annotations

from pathlib import Path

from tests.harness import Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config

NUMBERS = [f"+9053270000{i:02d}" for i in range(12)]
BEFORE = {NUMBERS[0], NUMBERS[3], NUMBERS[6], NUMBERS[9]}  # suppressed before the campaign
AFTER = {NUMBERS[10], NUMBERS[11]}  # suppressed after their messages were queued


def test_suppressed_numbers_are_never_submitted(tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path, "--delay-min-ms", "10", "--delay-max-ms", "50").start()
    data = tmp_path / "data"
    data.mkdir()
    # One connection, two messages a second: while the first submission hangs at the
    # provider, the sender holds at most two batches of two; the rest stay QUEUED.
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, rate_per_s=2, concurrency=1)
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            job = api.post("/api/contacts/import", json={"list": "l", "text": "\n".join(NUMBERS)})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
            first, *rest = sorted(BEFORE)
            api.post("/api/suppressions", json={"msisdn": first}).raise_for_status()
            api.post("/api/suppressions", content="\n".join(rest).encode(),
                     headers={"Content-Type": "text/plain"}).raise_for_status()
            sim.script([{"hang_s": 3}])
            c = api.post("/api/campaigns", json={"list": "l", "body": "hello"})
            assert c.status_code == 202 and c.json()["total"] == 12
            poll = c.json()["poll"]
            wait_for(lambda: api.get(poll).json()["created"] == 12, 30,
                     message="the campaign's messages to exist")

            def of(number: str) -> dict[str, object]:
                [m] = api.get("/api/messages", params={"msisdn": number}).json()["messages"]
                return dict(m)

            # The precondition that makes this test mean something: queued, not yet sent.
            assert {of(n)["state"] for n in AFTER} == {"QUEUED"}
            for number in sorted(AFTER):
                api.post("/api/suppressions", json={"msisdn": number}).raise_for_status()
            done = wait_for(lambda: (d := api.get(poll).json())["state"] == "DONE" and d, 60,
                            message="the campaign to finish")
            refs = {n: str(of(n)["ref"]) for n in NUMBERS}
            stats = sim.stats()
            for number in sorted(BEFORE | AFTER):
                assert stats["refs"].get(refs[number], {}).get("received", 0) == 0, number
                shown = message(api, refs[number])
                assert (shown["state"], shown["error"]) == ("CANCELLED", "suppressed")
                assert shown["submitted_at"] is None and shown["attempts"] == 0
            sent = [n for n in NUMBERS if n not in BEFORE | AFTER]
            assert all(stats["refs"][refs[n]]["received"] == 1 for n in sent)
            assert stats["submissions"] == len(sent) == 6
            assert done["suppressed"] == 6
            assert done["counts"]["CANCELLED"] == 6
            assert sum(done["counts"].values()) == done["total"] == 12
            assert done["finalised"] == 12 - sum(done["counts"].get(s, 0) for s in (
                "SUBMITTED", "ACCEPTED", "ENROUTE"))
    finally:
        server.stop()
        sim.stop()
