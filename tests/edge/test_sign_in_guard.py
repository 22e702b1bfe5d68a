"""EDGE-6: sign-in resists guessing (per name, per address) and floods (bounded hashing).

The server's clock is a file the test moves, so the delays are waited out without
sleeping. The guard's counts and used tokens are in the database: two processes on one
PostgreSQL database share them, as two behind a load balancer must.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.harness import FileClock, Server, db_rows
from tests.web.console_support import PASSWORD, create_user, csrf_of

T0 = 1_800_000_000_000


@pytest.fixture
def console(data_dir: Path, tmp_path: Path) -> Iterator[tuple[Server, FileClock]]:
    clock = FileClock(tmp_path / "clock", T0)
    srv = Server(data_dir, env=clock.env).start()
    try:
        create_user(data_dir, "alice")
        yield srv, clock
    finally:
        srv.stop()


def attempt(srv: Server, name: str, password: str, post_to: Server | None = None
            ) -> httpx.Response:
    """One sign-in through the form: fetched from ``srv``, posted to ``post_to`` (the
    same server unless given), as a load balancer may send the two requests."""
    with srv.client() as client:
        form = client.get("/login")
        assert form.status_code == 200
        target = post_to.url if post_to is not None else ""
        return client.post(target + "/login",
                           data={"csrf_token": csrf_of(form.text), "username": name,
                                 "password": password, "next": "/import"})


def test_failures_slow_the_next_attempts_down_and_the_right_password_still_works(
        console: tuple[Server, FileClock]) -> None:
    srv, clock = console
    assert [attempt(srv, "alice", f"guess-{i}").status_code for i in range(3)] == [401] * 3
    fourth = attempt(srv, "alice", "guess-3")
    assert fourth.status_code == 401  # the 4th failure: from now on the name waits
    blocked = attempt(srv, "alice", PASSWORD)
    assert blocked.status_code == 429, "the right password is not even checked while blocked"
    assert int(blocked.headers["Retry-After"]) == 1
    assert "Too many failed sign-ins" in blocked.text
    clock.advance(1000)
    assert attempt(srv, "alice", "guess-4").status_code == 401
    delays = []
    for _ in range(3):  # each further failure doubles the wait: 2 s, 4 s, 8 s
        wait = attempt(srv, "alice", PASSWORD)
        assert wait.status_code == 429
        delays.append(int(wait.headers["Retry-After"]))
        clock.advance(delays[-1] * 1000)
        assert attempt(srv, "alice", "wrong again").status_code == 401
    assert delays == [2, 4, 8]
    clock.advance(16_000)
    ok = attempt(srv, "alice", PASSWORD)
    assert ok.status_code == 303 and ok.headers["location"] == "/import"
    # The right password cleared the name's count: a typo now costs nothing.
    assert attempt(srv, "alice", "typo").status_code == 401
    assert attempt(srv, "alice", PASSWORD).status_code == 303


def test_a_count_is_forgotten_an_hour_after_its_last_failure(
        console: tuple[Server, FileClock], data_dir: Path) -> None:
    srv, clock = console
    assert [attempt(srv, "alice", f"guess-{i}").status_code for i in range(4)] == [401] * 4
    assert attempt(srv, "alice", PASSWORD).status_code == 429
    clock.advance(3_600_001)
    # Counted on from four, the next failures would block for 2 s, 4 s ...: they start
    # again from none, so three are free and the right password then works.
    assert [attempt(srv, "alice", f"later-{i}").status_code for i in range(3)] == [401] * 3
    assert attempt(srv, "alice", PASSWORD).status_code == 303
    clock.advance(3_600_001)
    attempt(srv, "bob", "guess")  # a failure's unit removes what was forgotten
    keys = {str(r[0]) for r in db_rows(data_dir, "SELECT key FROM sign_in_failures")}
    assert keys == {"user:bob", "addr:127.0.0.1"}


def test_one_address_guessing_many_names_is_slowed_down_too(
        console: tuple[Server, FileClock]) -> None:
    srv, clock = console
    answers = [attempt(srv, f"user-{i}", "guess").status_code for i in range(10)]
    assert answers == [401] * 10  # ten free failures for an address
    assert attempt(srv, "user-10", "guess").status_code == 401
    spray = attempt(srv, "alice", PASSWORD)
    assert spray.status_code == 429 and int(spray.headers["Retry-After"]) == 1
    clock.advance(1000)
    assert attempt(srv, "alice", PASSWORD).status_code == 303


def test_every_sign_in_form_has_a_fresh_token_good_for_one_attempt(
        console: tuple[Server, FileClock]) -> None:
    srv, _ = console
    with srv.client() as client:
        first = csrf_of(client.get("/login").text)
        second = csrf_of(client.get("/login").text)
        assert first != second
        cookie = client.cookies["appliance_signin"]
        assert cookie == second
        used = client.post("/login", data={"csrf_token": second, "username": "alice",
                                           "password": "wrong"})
        assert used.status_code == 401
        client.cookies.set("appliance_signin", second, path="/login")
        replay = client.post("/login", data={"csrf_token": second, "username": "alice",
                                             "password": PASSWORD})
        assert replay.status_code == 403, "a token is good for one attempt"
        assert "appliance_session=" not in replay.headers.get("set-cookie", "")
        made_up = "x" * 30
        client.cookies.set("appliance_signin", made_up, path="/login")
        forged = client.post("/login", data={"csrf_token": made_up, "username": "alice",
                                             "password": PASSWORD})
        assert forged.status_code == 403, "a token we did not issue is refused"


def test_a_flood_of_sign_ins_is_bounded_and_the_api_keeps_answering(
        console: tuple[Server, FileClock]) -> None:
    srv, _ = console
    flood = 60
    forms = []
    for _ in range(flood):
        client = srv.client()
        forms.append((client, csrf_of(client.get("/login").text)))
    start = threading.Barrier(flood)

    def post(i: int) -> httpx.Response:
        client, token = forms[i]
        start.wait()
        # Each from its own address (as a local proxy reports it), each a new name:
        # no throttle applies, only the bound on hashing.
        return client.post("/login", data={"csrf_token": token, "username": f"flood-{i}",
                                           "password": "guess"},
                           headers={"X-Forwarded-For": f"203.0.113.{i}"})

    assert srv.proc is not None
    peak_before = peak_rss_kb(srv.proc.pid)
    with concurrent.futures.ThreadPoolExecutor(flood) as pool:
        answers = list(pool.map(post, range(flood)))
        health = httpx.get(srv.url + "/healthz", timeout=5)
    for client, _ in forms:
        client.close()
    statuses = [a.status_code for a in answers]
    assert set(statuses) <= {401, 429} and health.status_code == 200
    busy = [a for a in answers if "being checked right now" in a.text]
    assert busy, f"{flood} at once cannot all have been waiting to be hashed"
    assert all(a.status_code == 429 and a.headers["Retry-After"] == "1" for a in busy)
    # scrypt takes 16 MB a check: sixty at once would be ~1 GB; two at a time is 32 MB.
    assert peak_rss_kb(srv.proc.pid) - peak_before < 150_000
    metrics = httpx.get(srv.url + "/metrics").text
    assert not re.search(r'status="5\d\d"', metrics)


@pytest.fixture
def two_processes(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
                  ) -> Iterator[tuple[Server, Server, FileClock]]:
    monkeypatch.setenv("APPLIANCE_DATABASE_URL", pg_url)
    clock = FileClock(tmp_path / "clock", T0)
    dirs = [tmp_path / "a" / "data", tmp_path / "b" / "data"]
    for d in dirs:
        d.mkdir(parents=True)
    a = Server(dirs[0], env=clock.env).start()
    b = Server(dirs[1], env=clock.env).start()
    try:
        create_user(dirs[0], "alice")
        yield a, b, clock
    finally:
        a.stop()
        b.stop()


def test_a_form_from_one_process_signs_in_at_another_once(
        two_processes: tuple[Server, Server, FileClock]) -> None:
    a, b, _ = two_processes
    with a.client() as client:
        form = client.get("/login")
        signed_in = client.post(b.url + "/login", data={
            "csrf_token": csrf_of(form.text), "username": "alice", "password": PASSWORD,
            "next": "/import"})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/import"
        # The session made at B is good at A: the console works behind a load balancer.
        assert client.get("/lists").status_code == 200
        assert client.get(b.url + "/lists").status_code == 200
    with a.client() as client:
        token = csrf_of(client.get("/login").text)
        first = client.post("/login", data={"csrf_token": token, "username": "alice",
                                            "password": "wrong"})
        assert first.status_code == 401
        client.cookies.set("appliance_signin", token, path="/login")
        replay = client.post(b.url + "/login", data={"csrf_token": token,
                                                     "username": "alice",
                                                     "password": PASSWORD})
        assert replay.status_code == 403, "a token used at one process is used at all"


def test_failures_at_one_process_block_the_name_at_the_other(
        two_processes: tuple[Server, Server, FileClock]) -> None:
    a, b, clock = two_processes
    answers = [attempt(a if i % 2 else b, "alice", f"guess-{i}").status_code
               for i in range(4)]
    assert answers == [401] * 4  # three free failures, counted across both processes
    for srv in (a, b):
        blocked = attempt(srv, "alice", PASSWORD)
        assert blocked.status_code == 429 and blocked.headers["Retry-After"] == "1"
    clock.advance(1000)
    assert attempt(b, "alice", PASSWORD).status_code == 303


def peak_rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    assert found
    return int(found.group(1))
