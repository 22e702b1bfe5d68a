"""The ESME session against the built-in SMSC simulator (SMPP-1, SMPP-2, SMPP-4)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter

from appliance.providers.base import SubmitResult
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp.deliver import Deliver
from appliance.smpp.session import SmppSession
from appliance.smpp.status import ESME_RX_T_APPN
from tests.smpp.support import Store, message, rig, run, settings_for, wait_until


def calm(**knobs: object) -> SmscBehaviour:
    return SmscBehaviour(seed=11, delay_min_ms=0, delay_max_ms=5, **knobs)  # type: ignore[arg-type]


def test_binds_submits_and_files_every_receipt_under_the_answered_id() -> None:
    async def body() -> None:
        async with rig(calm()) as r:
            state = r.session.state()
            assert state.bound and state.bound_since_ms and state.links[0].smsc_system_id
            segs = [s for i in range(40) for s in message(f"m{i}", f"hello {i}")]
            outs = await r.submit(segs)
            assert [o.result for o in outs] == [SubmitResult.ACCEPTED] * 40
            assert all(o.message_id and o.id_key for o in outs)
            await wait_until(lambda: len(r.store.stored) == 40, what="40 receipts")
            assert sorted(r.store.receipt_keys()) == sorted(o.id_key for o in outs)
            assert r.sim.stats.duplicates() == {}
            assert r.sim.stats.submits == 40
            # Every receipt was answered ESME_ROK only after it was stored.
            assert r.sim.stats.deliver_statuses == Counter({0: 40})
        assert r.sim.stats.unbinds == 1  # stop() unbinds

    run(body())


def test_a_long_turkish_text_goes_as_concatenated_ucs2_segments() -> None:
    async def body() -> None:
        async with rig(calm()) as r:
            text = "Kampanya: bugün tüm ürünlerde %20 indirim, kaçırmayın! Ğ Ş İ ı ç " * 3
            segs = message("tr1", text)
            assert len(segs) > 1 and {s.data_coding for s in segs} == {8}
            outs = await r.submit(segs)
            assert [o.part for o in outs] == list(range(1, len(segs) + 1))
            assert {o.result for o in outs} == {SubmitResult.ACCEPTED}
            assert len({o.message_id for o in outs}) == len(segs)  # one id per part (MSG-3)
            got = sorted(r.sim.stats.received, key=lambda k: k[1][5])
            assert [k[1][:6] for k in got] == [bytes((5, 0, 3, segs[0].short_message[3],
                                                      len(segs), i))
                                               for i in range(1, len(segs) + 1)]
            joined = b"".join(k[1][6:] for k in got).decode("utf-16-be")
            assert joined == text

    run(body())


def test_wrong_password_is_refused_and_nothing_is_written() -> None:
    async def body() -> None:
        async with rig(calm(), wait_bind=False, password="nope", bound_wait_s=0.2) as r:
            await wait_until(lambda: r.sim.stats.bind_refused >= 1, what="refused bind")
            assert not r.session.state().bound
            assert "ESME_RINVPASWD" in (r.session.state().links[0].last_error or "")
            [out] = await r.submit(message("p1", "hi"))
            assert out.result == SubmitResult.RETRY and not out.written
            assert r.sim.stats.submits == 0

    run(body())


def test_enquire_link_keeps_the_session_alive() -> None:
    async def body() -> None:
        async with rig(calm(), enquire_link_s=0.05) as r:
            await wait_until(lambda: r.sim.stats.enquire_links >= 3, what="enquire_links")
            assert r.session.state().bound and r.session.state().reconnects == 0

    run(body())


def test_the_window_is_filled_and_never_exceeded() -> None:
    async def body() -> None:
        async with rig(calm(resp_delay_ms=30), window=4) as r:
            seen: list[int] = []
            task = asyncio.create_task(r.submit(
                [s for i in range(24) for s in message(f"w{i}", f"window {i}")]))
            while not task.done():
                seen.append(r.session.state().window_in_use)
                await asyncio.sleep(0.002)
            assert {o.result for o in task.result()} == {SubmitResult.ACCEPTED}
            assert r.sim.stats.max_outstanding == 4
            assert max(seen) <= 4 and 4 in seen

    run(body())


def test_the_rate_is_respected() -> None:
    async def body() -> None:
        async with rig(calm(), rate_per_s=100) as r:
            started = time.monotonic()
            await r.submit([s for i in range(40) for s in message(f"r{i}", f"rate {i}")])
            times = r.sim.stats.arrivals
            # A burst of rate/10 = 10 tokens, then one every 10 ms: never ahead of that
            # schedule (a busy machine can only make it later), so 40 take >= 0.3 s.
            for n, t in enumerate(times, start=1):
                assert n <= 10 + 100 * (t - started) + 1
            assert times[-1] - started >= 0.29

    run(body())


def test_outcomes_per_command_status() -> None:
    async def body() -> None:
        async with rig(calm(throttle_rate=1.0), rate_per_s=1000) as r:
            outs = await r.submit(message("t1", "one") + message("t2", "two"))
            assert {o.result for o in outs} == {SubmitResult.RETRY}
            assert {o.status_name for o in outs} == {"ESME_RTHROTTLED"}
            assert all(o.retry_after_s and o.written for o in outs)
            state = r.session.state()
            assert state.throttled == 2 and state.rate_per_s < 1000  # it slowed down
        async with rig(calm(throttle_rate=1.0, throttle_status=0x14)) as r:
            [out] = await r.submit(message("q1", "queue full"))
            assert (out.result, out.status_name) == (SubmitResult.RETRY, "ESME_RMSGQFUL")
        async with rig(calm(reject_rate=1.0)) as r:
            [out] = await r.submit(message("x1", "bad destination"))
            assert out.result == SubmitResult.REJECTED
            assert (out.command_status, out.status_name) == (0x0B, "ESME_RINVDSTADR")
            assert r.sim.stats.submits == 1

    run(body())


def test_written_but_unanswered_is_uncertain_and_a_late_answer_is_reported() -> None:
    async def body() -> None:
        async with rig(calm(unanswered_rate=1.0), response_timeout_s=0.2) as r:
            outs = await r.submit(message("u1", "never answered") + message("u2", "neither"))
            assert {(o.result, o.written) for o in outs} == {(SubmitResult.UNCERTAIN, True)}
            assert r.sim.stats.submits == 2  # written once each, never again
            # The SMSC took them: their receipts still come, under ids we never learnt.
            await wait_until(lambda: len(r.store.stored) == 2, what="receipts")
        async with rig(calm(resp_delay_ms=300), response_timeout_s=0.1) as r:
            [out] = await r.submit(message("l1", "late"))
            assert out.result == SubmitResult.UNCERTAIN
            await wait_until(lambda: r.store.late, what="late submit_sm_resp")
            [late] = r.store.late
            assert (late.ref, late.part, late.status_name) == ("l1", 1, "ESME_ROK")
            assert late.message_id == r.sim.stats.accepted[next(iter(r.sim.stats.accepted))]
            await wait_until(lambda: r.store.receipt_keys() == [late.id_key], what="receipt")

    run(body())


def test_session_loss_mid_window_uncertain_if_written_retry_if_not() -> None:
    async def body() -> None:
        # The first submit_sm makes the SMSC drop the session; with a window of 1 the
        # second segment was still waiting for the window: never written.
        async with rig(calm(drop_every=1), window=1, reconnect_min_s=0.5) as r:
            first, second = await r.submit(message("d1", "first") + message("d2", "second"))
            assert (first.result, first.written) == (SubmitResult.UNCERTAIN, True)
            assert (second.result, second.written) == (SubmitResult.RETRY, False)
            assert r.sim.stats.submits == 1
            # It binds again by itself, and the dropped one's receipt still arrives.
            assert await r.session.wait_bound(3.0)
            assert r.session.state().reconnects == 1
            await wait_until(lambda: len(r.store.stored) == 1, what="receipt after rebind")

    run(body())


def test_reconnects_after_drops_and_sends_nothing_twice() -> None:
    async def body() -> None:
        async with rig(calm(drop_every=7), window=3) as r:
            results: Counter[SubmitResult] = Counter()
            pending = [s for i in range(30) for s in message(f"c{i}", f"drops {i}")]
            while pending:  # the sender's part: RETRY again, never UNCERTAIN
                outs = await r.submit(pending)
                results.update(o.result for o in outs)
                pending = [s for s, o in zip(pending, outs, strict=True)
                           if o.result == SubmitResult.RETRY]
            assert r.sim.stats.duplicates() == {}
            assert r.session.state().reconnects >= 3
            assert results[SubmitResult.ACCEPTED] + results[SubmitResult.UNCERTAIN] == 30
            assert results[SubmitResult.UNCERTAIN] >= 4

    run(body())


def test_receipts_before_the_submit_sm_resp_are_handed_over_first() -> None:
    async def body() -> None:
        async with rig(calm(early_receipts=1.0), window=1) as r:
            for i in range(10):
                [out] = await r.submit(message(f"e{i}", f"early {i}"))
                # Its receipt was already handed to the store when the answer came.
                assert out.id_key in r.store.receipt_keys()

    run(body())


def test_duplicates_and_reordered_intermediates_are_all_handed_over() -> None:
    async def body() -> None:
        async with rig(calm(duplicate_rate=1.0, reorder_rate=1.0, delivered_rate=1.0)) as r:
            [out] = await r.submit(message("dup", "twice"))
            await wait_until(lambda: len(r.store.stored) == 3, what="three receipts")
            assert [d.receipt.status for d in r.store.stored if d.receipt] == [
                "DELIVRD", "DELIVRD", "ENROUTE"]
            assert {d.receipt.key for d in r.store.stored if d.receipt} == {out.id_key}
            assert [d.receipt.final for d in r.store.stored if d.receipt] == [True, True, False]

    run(body())


def test_hex_answers_with_decimal_receipt_text_match() -> None:
    async def body() -> None:
        behaviour = calm(ids="hex-text-decimal", receipt_tlvs=False)
        async with rig(behaviour) as r:
            outs = await r.submit([s for i in range(60) for s in message(f"h{i}", f"hex {i}")])
            await wait_until(lambda: len(r.store.stored) == 60, what="receipts")
            for d in r.store.stored:
                assert d.receipt is not None and d.receipt.tlv_id is None
                assert d.receipt.text_id and d.receipt.text_id.isdigit()
            assert sorted(r.store.receipt_keys()) == sorted(o.id_key or "" for o in outs)

    run(body())


def test_a_receipt_not_stored_is_answered_temporary_and_comes_again() -> None:
    async def body() -> None:
        seen: Counter[str] = Counter()

        def fail_first(d: Deliver) -> bool:
            assert d.receipt is not None
            seen[d.receipt.key] += 1
            return seen[d.receipt.key] == 1

        store = Store(fail=fail_first)
        async with rig(calm(redeliver_ms=20), store=store) as r:
            outs = await r.submit([s for i in range(5) for s in message(f"s{i}", f"store {i}")])
            await wait_until(lambda: len(store.stored) == 5, what="redelivered receipts")
            assert r.sim.stats.deliver_statuses[ESME_RX_T_APPN] == 5
            assert sorted(store.receipt_keys()) == sorted(o.id_key or "" for o in outs)
            assert r.session.state().deliver_temp_errors == 5

    run(body())


def test_a_store_that_raises_is_answered_temporary_too() -> None:
    async def body() -> None:
        calls = Counter[int]()

        async def flaky(d: Deliver) -> bool:
            calls[0] += 1
            if calls[0] == 1:
                raise RuntimeError("disk full")
            return True

        async with rig(calm(redeliver_ms=20), deliver=flaky) as r:
            await r.submit(message("f1", "raise"))
            await wait_until(lambda: r.sim.stats.deliver_statuses[0] == 1, what="stored")
            assert r.sim.stats.deliver_statuses[ESME_RX_T_APPN] == 1

    run(body())


def test_an_inbound_message_is_handed_over_as_not_a_receipt() -> None:
    async def body() -> None:
        async with rig(calm()) as r:
            r.sim.send_mo("905321234567", "ACME", "DUR lütfen")
            await wait_until(lambda: r.store.stored, what="inbound message")
            [mo] = r.store.stored
            assert not mo.is_receipt and mo.receipt is None and mo.error is None
            assert (mo.text, mo.source_addr, mo.destination_addr) == (
                "DUR lütfen", "905321234567", "ACME")
            await wait_until(lambda: r.sim.stats.mo_acked == ["DUR lütfen"], what="acked")

    run(body())


def test_transmitter_plus_receiver_binds_two_links() -> None:
    async def body() -> None:
        async with rig(calm(), bind="transmitter+receiver") as r:
            state = r.session.state()
            assert [ls.mode for ls in state.links] == ["transmitter", "receiver"]
            assert all(ls.bound for ls in state.links) and r.sim.stats.binds == 2
            outs = await r.submit(message("tr", "two links"))
            await wait_until(lambda: r.store.receipt_keys() == [outs[0].id_key],
                             what="receipt on the receiver")

    run(body())


def test_not_bound_at_all_is_retry_without_writing() -> None:
    async def body() -> None:
        session = SmppSession(settings_for(1, bound_wait_s=0.1), Store().on_deliver)
        await session.start()
        try:
            [out] = await session.submit(message("n1", "nobody listens"))
            assert (out.result, out.written) == (SubmitResult.RETRY, False)
            assert "cannot bind" in (session.state().links[0].last_error or "")
        finally:
            await session.stop(timeout_s=0.2)

    run(body())


def test_a_segment_no_smsc_could_take_is_rejected_unwritten() -> None:
    async def body() -> None:
        async with rig(calm()) as r:
            [seg] = message("big", "x")
            too_long = dataclasses.replace(seg, short_message=b"x" * 300)
            [out] = await r.submit([too_long])
            assert (out.result, out.written) == (SubmitResult.REJECTED, False)
            assert "254" in (out.error or "") and r.sim.stats.submits == 0

    run(body())
