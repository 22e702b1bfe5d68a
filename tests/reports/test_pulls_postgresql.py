"""The puller with two processes on one PostgreSQL database: one asks at a time (no
message is asked about twice as often), and when it is killed the other takes over."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import Server, create_account, db_rows
from tests.reports.pull_support import SIM_STATES, PullSimulator, pull_config, wait_all_final

N = 30


def send(server: Server, key: str, first: int, n: int) -> list[str]:
    refs = []
    with server.client(key) as api:
        for i in range(first, first + n):
            r = api.post("/api/messages", json={"to": f"+90532{i:07d}", "body": "hi"})
            assert r.status_code == 202, r.text
            refs.append(r.json()["ref"])
    return refs


def test_two_processes_ask_once_and_the_survivor_takes_over(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLIANCE_DATABASE_URL", pg_url)
    sim = PullSimulator(tmp_path, "--no-push", "--delay-min-ms", "50", "--delay-max-ms",
                        "300", "--seed", "9")
    sim.start()
    dirs = [tmp_path / "a" / "data", tmp_path / "b" / "data"]
    for d in dirs:
        d.mkdir(parents=True)
    a = Server(dirs[0], config=pull_config(tmp_path / "a.toml", sim.url))
    b = Server(dirs[1], config=pull_config(tmp_path / "b.toml", sim.url))
    a.start()
    b.start()
    try:
        key = create_account(dirs[0])
        refs = send(a, key, 0, N // 2) + send(b, key, N // 2, N // 2)
        final = wait_all_final(dirs[0], N)
        sim_refs = sim.stats()["refs"]
        assert {ref: SIM_STATES[sim_refs[ref]["final"]] for ref in refs} == final
        # One puller asked: each message once or twice, never once per process.
        assert all(1 <= sim_refs[ref]["pulls"] <= 2 for ref in refs), \
            [sim_refs[ref]["pulls"] for ref in refs]
        a.kill9()
        more = send(b, key, N, N // 2)
        final = wait_all_final(dirs[1], N + N // 2)
        sim_refs = sim.stats()["refs"]
        assert all(final[ref] == SIM_STATES[sim_refs[ref]["final"]] for ref in more)
        rows = db_rows(dirs[1], "SELECT count(*) FROM message_pulls WHERE next_at IS NOT NULL")
        assert rows == [(0,)]
    finally:
        b.stop()
        a.stop()
        sim.stop()
