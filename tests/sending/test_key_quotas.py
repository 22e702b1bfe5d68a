"""Quotas per API key (TEAM-1): ``--rate-per-s`` and ``--daily-limit`` under 100
concurrent clients on one key, across a restart, and on PostgreSQL across two processes.

The provider points at a closed port, so accepted messages wait in ``RETRY``: what is
counted is what the appliance accepted, read back from the store.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, db_rows, free_port, run_cli
from tests.sending.support import provider_config
from tests.sending.support_campaigns import import_list

NOON = 1_796_472_000_000  # 2026-12-05T12:00:00Z
DAY_S = 86_400
CLIENTS = 100


def new_key(data: Path, *limits: str) -> str:
    made = run_cli("key", "create", *limits, "--data-dir", str(data))
    return made.stdout.strip().splitlines()[-1]


def numbers(start: int, count: int) -> list[str]:
    return [f"+90533{start + i:07d}" for i in range(count)]


async def send_all(urls: list[str], key: str, tos: list[str]) -> list[httpx.Response]:
    """``CLIENTS`` clients at once, shared out over ``urls``, sending one message to each
    of ``tos`` in turn (each client its share)."""
    headers = {"Authorization": f"Bearer {key}"}

    async def client(n: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=urls[n % len(urls)], headers=headers,
                                     timeout=60) as api:
            return [await api.post("/api/messages", json={"to": to, "body": "hi"})
                    for to in tos[n::CLIENTS]]

    return [r for rs in await asyncio.gather(*(client(n) for n in range(CLIENTS))) for r in rs]


def daily_refusals_hold(answers: list[httpx.Response], now_ms: int) -> Counter[int]:
    """The answers' statuses, each refusal checked: ``429 daily_limit`` with the seconds
    to 00:00 UTC in ``Retry-After``."""
    statuses = Counter(r.status_code for r in answers)
    assert set(statuses) <= {202, 429}, [r.text for r in answers if r.status_code not in
                                         (202, 429)][:3]
    to_midnight = DAY_S - (now_ms // 1000) % DAY_S
    for r in answers:
        if r.status_code == 429:
            assert r.json()["error"] == "daily_limit", r.text
            assert int(r.headers["Retry-After"]) == to_midnight
    return statuses


def messages_of(data: Path, account: str, table: str = "messages") -> int:
    return int(db_rows(data, f"SELECT count(*) FROM {table} t JOIN accounts a"
                       " ON a.id = t.account_id WHERE a.name = ?", (account,))[0][0])


def counted(data: Path, key: str) -> list[tuple[int, int]]:
    return [(int(r[0]), int(r[1])) for r in db_rows(
        data, "SELECT c.day, c.messages FROM key_daily_counts c JOIN api_keys k"
        " ON k.id = c.key_id WHERE k.prefix = ? ORDER BY c.day", (key[:8],))]


@dataclass
class Rig:
    server: Server
    clock: FileClock

    @property
    def data(self) -> Path:
        return self.server.data_dir


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("quotas")
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", NOON)
    cfg = provider_config(tmp / "cfg.toml", f"http://127.0.0.1:{free_port()}")
    srv = Server(data, config=cfg, env=clock.env).start()
    try:
        yield Rig(srv, clock)
    finally:
        srv.stop()


def test_the_rate_holds_within_a_token_under_100_clients(rig: Rig) -> None:
    data, srv = rig.data, rig.server
    rate = 2  # low enough that even a loaded machine asks faster
    create_account(data, "rate")
    key = new_key(data, "--account", "rate", "--rate-per-s", str(rate))
    headers = {"Authorization": f"Bearer {key}"}

    async def hammer(seconds: float, least: int) -> tuple[list[httpx.Response], float]:
        stop_at = time.monotonic() + seconds
        answers: list[httpx.Response] = []

        async def client(n: int) -> None:
            async with httpx.AsyncClient(base_url=srv.url, headers=headers,
                                         timeout=60) as api:
                i = 0
                while time.monotonic() < stop_at or len(answers) < least:
                    answers.append(await api.post("/api/messages", json={
                        "to": numbers(n * 10_000 + i, 1)[0], "body": "hi"}))
                    i += 1

        began = time.monotonic()
        await asyncio.gather(*(client(n) for n in range(CLIENTS)))
        return answers, time.monotonic() - began

    answers, elapsed = asyncio.run(hammer(1.0, 200))
    statuses = Counter(r.status_code for r in answers)
    assert set(statuses) == {202, 429}, statuses
    for r in answers:
        if r.status_code == 429:
            assert r.json()["error"] == "rate_limited", r.text
            assert int(r.headers["Retry-After"]) >= 1
    accepted = statuses[202]
    # A full bucket (one second's worth) and the rate since: never a token more.
    assert rate <= accepted <= rate + rate * elapsed + 1, (accepted, elapsed)
    assert messages_of(data, "rate") == accepted


def test_the_daily_limit_is_exact_under_100_clients_and_across_a_restart(rig: Rig) -> None:
    data, srv, clock = rig.data, rig.server, rig.clock
    unlimited = create_account(data, "daily")  # a key made before limits: none
    key = new_key(data, "--account", "daily", "--daily-limit", "150")
    listed = run_cli("key", "list", "--account", "daily", "--data-dir", str(data)).stdout
    assert "150 a day" in listed

    answers = asyncio.run(send_all([srv.url], key, numbers(0, 300)))
    assert daily_refusals_hold(answers, NOON) == {202: 150, 429: 150}
    assert messages_of(data, "daily") == 150
    assert counted(data, key) == [(NOON // 86_400_000, 150)]

    with srv.client(unlimited) as free, srv.client(key) as limited:
        assert free.post("/api/messages", json={"to": "+905330000001",
                                                "body": "hi"}).status_code == 202
        import_list(free, "five", 5)
        # A dry run creates nothing: not refused, not counted.
        dry = limited.post("/api/campaigns", json={"list": "five", "body": "hi",
                                                   "dry_run": True})
        assert dry.status_code == 200 and dry.json()["messages"] == 5
        refused = limited.post("/api/campaigns", json={"list": "five", "body": "hi"})
        assert refused.status_code == 429 and refused.json()["error"] == "daily_limit"
        assert refused.json()["requested"] == 5 and refused.json()["limit"] == 150
    assert messages_of(data, "daily", "campaigns") == 0

    srv.stop()
    srv.restart()
    with srv.client(key) as limited:
        again = limited.post("/api/messages", json={"to": "+905330000002", "body": "hi"})
        assert again.status_code == 429 and again.json()["error"] == "daily_limit"
        # The next UTC day counts from zero: a campaign of five and a message.
        clock.set((NOON // 86_400_000 + 1) * 86_400_000 + 1000)
        made = limited.post("/api/campaigns", json={"list": "five", "body": "hi"})
        assert made.status_code == 202, made.text
        once = {"Idempotency-Key": "same-one"}
        for _ in range(2):  # a repeat gives back the message and is not counted again
            r = limited.post("/api/messages", json={"to": "+905330000003", "body": "hi"},
                             headers=once)
            assert r.status_code == 202, r.text
    assert counted(data, key) == [(NOON // 86_400_000, 150), (NOON // 86_400_000 + 1, 6)]


def test_key_create_refuses_limits_that_are_no_limits(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    run_cli("account", "create", "acme", "--data-dir", data)
    for flags in (("--rate-per-s", "0"), ("--daily-limit", "0"), ("--daily-limit", "x")):
        made = run_cli("key", "create", *flags, "--data-dir", data, check=False)
        assert made.returncode == 2 and flags[0] in made.stderr, made.stderr


@pytest.mark.slow
def test_on_postgresql_two_processes_never_pass_the_daily_limit(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLIANCE_DATABASE_URL", pg_url)
    cfg = provider_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{free_port()}")
    dirs = [tmp_path / "a" / "data", tmp_path / "b" / "data"]
    for d in dirs:
        d.mkdir(parents=True)
    create_account(dirs[0], "acme")
    key = new_key(dirs[0], "--daily-limit", "120")
    servers = [Server(d, config=cfg).start() for d in dirs]
    try:
        answers = asyncio.run(send_all([s.url for s in servers], key, numbers(0, 300)))
        statuses = Counter(r.status_code for r in answers)
        assert statuses == {202: 120, 429: 180}, statuses
        assert {r.json()["error"] for r in answers if r.status_code == 429} == {"daily_limit"}
        assert db_rows(dirs[0], "SELECT count(*) FROM messages")[0][0] == 120
        assert sum(m for _, m in counted(dirs[0], key)) == 120
    finally:
        for s in servers:
            s.stop()
