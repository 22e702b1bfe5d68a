"""Failover (ROUTE-3): a message of a route moves to the next provider only while its
bytes cannot have left: after ``failover_after`` unreached tries in a row, or a refusal
its kind declares as "this route cannot"; never an ``UNCERTAIN`` one (a timeout after
the request was sent), never one pinned by its request. Real servers, the built-in
simulator as both providers, counted at the simulators; on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import Server, create_account, free_port, wait_for
from tests.routes.support import failovers, first_move, route_config, send, tried_after, tries
from tests.sending.support import SimulatorProcess, message, wait_state

TAKEN = ("SUBMITTED", "DELIVERED", "FAILED", "EXPIRED")
FAILOVER_AFTER = 2


def start(
    tmp_path: Path, a_url: str, b_url: str, concurrency: int = 4, failover_after: int = 3
) -> tuple[Server, str]:
    data = tmp_path / "data"
    data.mkdir()
    server = Server(
        data,
        config=route_config(
            tmp_path / "cfg.toml",
            a_url,
            b_url,
            concurrency=concurrency,
            failover_after=failover_after,
        ),
    ).start()
    return server, create_account(data, "acme")


@pytest.mark.usefixtures("backend")
@pytest.mark.slow
def test_a_provider_refusing_connections_moves_its_routes_messages_after_failover_after_tries(
    tmp_path: Path,
) -> None:
    b = SimulatorProcess(tmp_path).start()
    # One message a try at ``a`` (concurrency 1), so each try leaves one ``unreached``
    # entry and the tries before the first move can be counted from the messages' logs.
    # Two tries before a move, not the default three: the lane's holds double (1, 2, 4,
    # 8 s), so the pinned message's try while a is failing comes after 3 s rather than 7.
    server, key = start(
        tmp_path,
        f"http://127.0.0.1:{free_port()}",
        b.url,  # nobody there
        concurrency=1,
        failover_after=FAILOVER_AFTER,
    )
    try:
        with server.client(key) as api:
            pinned = send(api, "+905321230000", provider="a")
            routed = [send(api, f"+90532123{i:04d}") for i in range(1, 7)]
            for ref in routed:
                m = wait_state(api, ref, *TAKEN, timeout=60)
                assert m["provider"] == "b" and m["route"] == "+90", m
                assert m["attempts"] == 1, m  # the unreached tries never counted
                log = tries(api, ref)
                assert ("a", "failed_over") in log and log[-1] == ("b", "accepted"), log
                assert {o for p, o in log if p == "a"} <= {"unreached", "failed_over"}, log
                assert b.ref(ref)["received"] == 1
            # Nothing moved before the provider had failed FAILOVER_AFTER tries in a row.
            shown = [message(api, r) for r in [pinned, *routed]]
            # Counted as entries, not distinct times: under load the writer may record
            # two tries' outcomes in one unit, at one millisecond.
            unreached = [
                a["at"]
                for m in shown
                for a in m["attempts_by_provider"]
                if a["outcome"] == "unreached"
            ]
            moved_at = first_move(api, routed)
            assert len([t for t in unreached if t <= moved_at]) >= FAILOVER_AFTER, shown
            assert failovers(api, "a", "b", "unreached") == len(routed)
            # The pinned message waits for its provider, tried again while a is failing
            # (after the routed messages moved on), never moved.
            wait_for(
                lambda: tried_after(api, pinned, "a", moved_at),
                60,
                message="the pinned message tried while its provider was failing",
            )
            m = message(api, pinned)
            assert (
                m["provider"] == "a" and m["route"] is None and m["state"] in ("QUEUED", "RETRY")
            ), m
            assert set(tries(api, pinned)) == {("a", "unreached")}
            assert b.ref(pinned)["received"] == 0
    finally:
        server.stop()
        b.stop()


@pytest.mark.usefixtures("backend")
def test_a_timeout_after_the_request_was_sent_stays_uncertain_and_never_moves(
    tmp_path: Path,
) -> None:
    a = SimulatorProcess(tmp_path).start()
    b = SimulatorProcess(tmp_path).start()
    # Takes the message (and reports nothing), answers after the submit timeout.
    a.script([{"hang_s": 8, "silent": True}])
    server, key = start(tmp_path, a.url, b.url)
    try:
        with server.client(key) as api:
            late = send(api, "+905321230001")
            m = wait_state(api, late, "UNCERTAIN", timeout=60)
            assert m["provider"] == "a" and m["route"] == "+90"
            assert tries(api, late) == [("a", "uncertain")]
            # The next message goes through a (reached): the first one is still where it
            # was, sent once in total.
            after = send(api, "+905321230002")
            assert wait_state(api, after, *TAKEN, timeout=60)["provider"] == "a"
            m = message(api, late)
            assert m["state"] == "UNCERTAIN" and m["provider"] == "a", m
            assert a.ref(late)["received"] == 1 and b.ref(late)["received"] == 0
            assert failovers(api, "a", "b", "unreached") == 0
    finally:
        server.stop()
        a.stop()
        b.stop()


@pytest.mark.usefixtures("backend")
def test_a_route_refusal_moves_the_message_at_once_but_not_a_pinned_one(tmp_path: Path) -> None:
    a = SimulatorProcess(tmp_path).start()
    b = SimulatorProcess(tmp_path).start()
    server, key = start(tmp_path, a.url, b.url)
    try:
        with server.client(key) as api:
            # Vonage's status 6, "an un-recognized number prefix": this route cannot.
            a.script([{"status": "6"}])
            moved = send(api, "+905321230003")
            m = wait_state(api, moved, *TAKEN, timeout=60)
            assert m["provider"] == "b" and m["route"] == "+90", m
            assert tries(api, moved) == [
                ("a", "route_refused"),
                ("a", "failed_over"),
                ("b", "accepted"),
            ]
            assert a.ref(moved)["received"] == 1 and b.ref(moved)["received"] == 1
            assert a.ref(moved)["accepted"] == 0
            assert failovers(api, "a", "b", "route_refused") == 1
            # Pinned by its request: the refusal is final, as without routes.
            a.script([{"status": "6"}])
            pinned = send(api, "+905321230004", provider="a")
            m = wait_state(api, pinned, "REJECTED", timeout=60)
            assert m["provider"] == "a" and m["route"] is None
            assert tries(api, pinned) == [("a", "rejected")]
            assert b.ref(pinned)["received"] == 0
            # Another refusal (status 3, invalid parameters) of a routed message is final.
            a.script([{"status": "3"}])
            other = send(api, "+905321230005")
            assert wait_state(api, other, "REJECTED", timeout=60)["provider"] == "a"
            assert b.ref(other)["received"] == 0
    finally:
        server.stop()
        a.stop()
        b.stop()


TURKISH_BODY = (
    "Kampanya başladı: İstanbul'da ışıklı günler, çiçekler ve güçlü fırsatlar sizi bekliyor."
)


@pytest.mark.usefixtures("backend")
def test_a_message_its_next_provider_would_send_otherwise_waits_for_its_own(tmp_path: Path) -> None:
    """ENC-1: a GSM-7 Turkish message moves only to a provider that sends it as it was
    counted; b has no Turkish tables (it would send UCS-2, more parts), so when a is
    not reached the message waits for a, tried again and again, and goes through a once
    a answers, in the encoding and parts it was accepted with, sent once in total."""
    a_port = free_port()
    b = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    # a fails over at its first unreached try: the lane's holds double (1, 2, 4, 8 s),
    # so the Turkish message's try while a is failing comes after 1 s rather than 7.
    config = route_config(
        tmp_path / "cfg.toml",
        f"http://127.0.0.1:{a_port}",
        b.url,
        a_extra='national_language = "turkish"',
        failover_after=1,
    )
    server = Server(data, config=config).start()
    a: SimulatorProcess | None = None
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            turkish = send(api, "+905321230010", body=TURKISH_BODY)
            accepted = message(api, turkish)
            assert (accepted["encoding"], accepted["parts"]) == ("GSM-7 Turkish", 1)
            plain = send(api, "+905321230011")
            # The plain message moves on; the Turkish one stays with a.
            assert wait_state(api, plain, *TAKEN, timeout=60)["provider"] == "b"
            moved_at = first_move(api, [plain])
            wait_for(
                lambda: tried_after(api, turkish, "a", moved_at),
                60,
                message="the Turkish message tried at a while a was failing",
            )
            m = message(api, turkish)
            assert (
                m["provider"] == "a" and m["route"] == "+90" and m["state"] in ("QUEUED", "RETRY")
            ), m
            assert set(tries(api, turkish)) == {("a", "unreached")}
            assert (m["encoding"], m["parts"]) == ("GSM-7 Turkish", 1)
            assert b.ref(turkish)["received"] == 0
            assert failovers(api, "a", "b", "unreached") == 1
            # a answers again: the message goes through it, as it was counted.
            a = SimulatorProcess(tmp_path, port=a_port).start()
            m = wait_state(api, turkish, *TAKEN, timeout=90)
            assert m["provider"] == "a" and (m["encoding"], m["parts"]) == ("GSM-7 Turkish", 1), m
            assert a.ref(turkish)["received"] == 1 and b.ref(turkish)["received"] == 0
    finally:
        server.stop()
        b.stop()
        if a is not None:
            a.stop()
