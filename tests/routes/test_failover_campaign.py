"""A provider killed in the middle of a campaign (ROUTE-3): its routes' messages move to
the next provider, and every message is submitted once in total across both, counted
at the two simulators.

Provider ``a`` is a simulator behind a TCP relay in a process of its own
(:mod:`tests.routes.tcp_relay`); the relay is killed with ``kill -9`` once ``a`` has
taken a fifth of the campaign, so ``a``'s address refuses connections from then on while
the simulator behind it still tells what reached it. A message in flight at the kill
may have reached ``a`` or not: it is ``UNCERTAIN`` and never moves (at most one per
worker, and one per kept connection found dead).

The count: measured on the two shared cores (load average 3.4 to 3.7), the whole test
took 45 s with 10,000 messages and 21 s with 4,000 (import, campaign and checks
included), so it runs 4,000: the biggest count that finishes in about 20 s. Set
``COUNT = 10_000`` to run the campaign of the issue.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.harness import ROOT, Server, create_account, db_rows, free_port, wait_for
from tests.routes.support import failovers, route_config, tries
from tests.sending.support import SimulatorProcess
from tests.sending.support_campaigns import campaign, import_list, submissions

COUNT = 4_000
CONCURRENCY = 8
WAITING = ("QUEUED", "RETRY", "SENDING")


def relay(listen: int, target: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.routes.tcp_relay", str(listen),
                             str(target)], cwd=ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"relay ready"
    return proc


def test_a_provider_killed_mid_campaign_each_message_is_submitted_once_in_total(
        tmp_path: Path) -> None:
    a = SimulatorProcess(tmp_path).start()
    b = SimulatorProcess(tmp_path).start()
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
            wait_for(lambda: submissions(a) >= COUNT // 5, 120, interval=0.05,
                     message="a fifth of the campaign at a")
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
                if state != "UNCERTAIN":
                    assert got_a + got_b == 1, (ref, state, provider)
                    assert (got_a if provider == "a" else got_b) == 1, (ref, provider)
            assert states["UNCERTAIN"] <= 2 * CONCURRENCY, states
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
