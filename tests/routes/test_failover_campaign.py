"""A provider killed in the middle of a campaign (ROUTE-3): its routes' messages move to
the next provider, and every message is submitted once in total across both, counted
at the two simulators.

Provider ``a`` is a simulator behind a TCP relay in a process of its own
(:mod:`tests.routes.tcp_relay`); the relay is killed with ``kill -9`` once ``a`` has
taken a fifth of the campaign, so ``a``'s address refuses connections from then on while
the simulator behind it still tells what reached it. Just before the kill, ``a`` is
scripted to answer its next submissions (one per worker) only after 3 s: they reached
``a`` and their answers never come back, so they are ``UNCERTAIN`` and must never move
(a message in flight at the kill may have reached ``a`` or not: at most one per worker,
and one per kept connection found dead).

The simulators push no receipts (``--no-push``): what is checked is what reached them,
and 10,000 receipts pushed back would have the server spend on reports the CPU it
needs for sending (the messages stay ``SUBMITTED``, which is settled).

The time, on the two shared cores: 17 to 21 s at a load average of 2 to 4.5, against
41 s for the same 10,000 messages before (both simulators pushing a receipt per
message, and ``a``'s whole statistics asked every 50 ms), run one after the other at a
load of 4.4 to 4.8; at a load of 5 to 7, 37 s against 58 s. Where the 17 s go: 2 s to
start the four processes, 0.6 s to import the list and make the campaign, 3 s for
``a``'s fifth, 3 s of the lane's holds before ``a``'s messages move (1 s then 2 s:
``failover_after = 3`` tries not reached; the sender's own timing), then ``b`` takes
the other 8,000 at about 1,100 a second (700 at a load of 6), bound by the server's
CPU: a concurrency of 16 instead of 8 changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.harness import ROOT, Server, create_account, db_rows, free_port, wait_for
from tests.routes.support import failovers, route_config, tries
from tests.sending.support import SimulatorProcess
from tests.sending.support_campaigns import campaign, import_list, submissions

COUNT = 10_000
CONCURRENCY = 8
WAITING = ("QUEUED", "RETRY", "SENDING")


def relay(listen: int, target: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.routes.tcp_relay", str(listen),
                             str(target)], cwd=ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"relay ready"
    return proc


def scripted_left(sim: SimulatorProcess) -> int:
    """How many scripted answers the simulator has not given yet."""
    queued: int = httpx.post(sim.url + "/_sim/script", json=[], timeout=10).json()["queued"]
    return queued


@pytest.mark.slow
def test_a_provider_killed_mid_campaign_each_message_is_submitted_once_in_total(
        tmp_path: Path) -> None:
    a = SimulatorProcess(tmp_path, "--no-push").start()
    b = SimulatorProcess(tmp_path, "--no-push").start()
    front = free_port()
    relayed = relay(front, a.port)
    data = tmp_path / "data"
    data.mkdir()
    config = route_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{front}", b.url,
                          concurrency=CONCURRENCY, rate_per_s=5000,
                          sending="batch_size = 500")
    server = Server(data, config=config).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            import_list(api, "big", COUNT)
            made = campaign(api, "big")  # no provider named: each message follows its route
            wait_for(lambda: submissions(a) >= COUNT // 5, 120, interval=0.25,
                     message="a fifth of the campaign at a")
            # The next submissions a takes, one per worker, it answers only after the
            # kill: they reached a, and their answers never come back (UNCERTAIN).
            a.script([{"hang_s": 3}] * CONCURRENCY)
            wait_for(lambda: scripted_left(a) == 0, 30, interval=0.05,
                     message="a to take the submissions it answers late")
            relayed.kill()  # kill -9: a's address refuses connections from now on
            relayed.wait(10)

            def settled() -> bool:
                left = db_rows(data, "SELECT count(*) FROM messages WHERE campaign_id = ?"
                               f" AND state IN {WAITING!r}", (made["campaignId"],))
                return int(left[0][0]) == 0

            wait_for(settled, 240, interval=0.2, message="every message sent")
            rows = db_rows(data, "SELECT ref, state, provider, route FROM messages"
                           " WHERE campaign_id = ?", (made["campaignId"],))
            assert len(rows) == COUNT
            at_a, at_b = a.stats()["refs"], b.stats()["refs"]
            states: Counter[str] = Counter()
            for ref, state, provider, route in rows:
                got_a = at_a.get(ref, {}).get("received", 0)
                got_b = at_b.get(ref, {}).get("received", 0)
                assert got_a + got_b <= 1, (ref, state, got_a, got_b)
                assert route == "+90"
                states[state] += 1
                if state == "UNCERTAIN":
                    # never moved: nothing of it at the provider it is not at
                    assert (got_b if provider == "a" else got_a) == 0, (ref, provider)
                else:
                    assert got_a + got_b == 1, (ref, state, provider)
                    assert (got_a if provider == "a" else got_b) == 1, (ref, provider)
            assert states["UNCERTAIN"] <= 2 * CONCURRENCY, states
            # The submissions a answered late reached it: UNCERTAIN, and never moved.
            assert sum(1 for ref, state, _, _ in rows if state == "UNCERTAIN"
                       and at_a.get(ref, {}).get("received", 0) == 1) >= 1, states
            # Every submission at the fakes is one of the campaign's, and each message but
            # an UNCERTAIN one not taken was submitted: the counts add up.
            total = submissions(a) + submissions(b)
            assert total == sum(r["received"] for r in (*at_a.values(), *at_b.values()))
            assert COUNT - states["UNCERTAIN"] <= total <= COUNT, (total, states)
            moved = [r for r in rows if r[2] == "b"]
            assert len(moved) > COUNT // 2, len(moved)
            sample = str(moved[-1][0])
            assert ("a", "failed_over") in tries(api, sample)
            assert failovers(api, "a", "b", "unreached") > 0
    finally:
        if relayed.poll() is None:
            relayed.kill()
        server.stop()
        a.stop()
        b.stop()
