"""``query_sm`` (ROUTE-2, SMPP 3.4 sections 4.8.1, 4.8.2, 5.2.28, 7.1.1): the PDUs, what an
answer says, the id spelled as the SMSC wrote it, and the asking itself over a real
session against the built-in SMSC with its receipts off, and against node-smpp's server
(an SMSC we did not write)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from appliance.config import ConfigError, ProviderSettings
from appliance.message_text.segments import segment
from appliance.provider_kinds import KINDS, check_providers, load_settings
from appliance.providers.base import OutgoingMessage, PartOutcome, SubmitResult
from appliance.providers.registry import Providers
from appliance.providers.status_query import PartTarget, PullTarget, PullVerdict
from appliance.reports.puller import lanes_of
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp import pdu
from appliance.smpp.id_memory import load_shape, save_shape
from appliance.smpp.ids import IdEvidence, IdReader, IdShape
from appliance.smpp.pull import SmppStatusQuery, message_verdict
from appliance.smpp.query import (
    ESME_RINVMSGID,
    ESME_RQUERYFAIL,
    QUERY_SM,
    Said,
    absolute_time_ms,
    query_sm,
    query_sm_resp,
    read_answer,
    read_query_sm,
)
from appliance.smpp.receipt import state_of
from appliance.smpp.transport import SmppTransport
from appliance.store import Store
from tests.smpp.node_peer import NodeSmsc, node_smsc
from tests.smpp.support import run, settings_for

__all__ = ["node_smsc"]
LONG = "Kampanya başladı, tüm ürünlerde indirim var, hemen bakın! " * 3


def _resp(state: int, final_date: str = "260101120000000+", status: int = 0) -> bytes:
    return query_sm_resp(7, status, message_id="1A2B", final_date=final_date,
                         message_state=state, error_code=0)


def test_query_sm_carries_the_id_and_the_source_address() -> None:
    frame = query_sm(5, message_id="00001A2b", source_ton=5, source_npi=0, source_addr="ACME")
    assert pdu.header(frame).command_id == QUERY_SM == 0x00000003
    assert frame[16:] == b"00001A2b\x00\x05\x00ACME\x00"
    q = read_query_sm(frame)
    assert (q.sequence, q.message_id, q.source_ton, q.source_npi, q.source_addr) == (
        5, "00001A2b", 5, 0, "ACME")


def test_every_message_state_maps_as_a_receipt_word_does() -> None:
    finals = {2: "DELIVERED", 3: "EXPIRED", 4: "FAILED", 5: "FAILED", 8: "REJECTED"}
    for value, state in finals.items():
        read = read_answer(_resp(value))
        assert (read.said, read.state) == (Said.FINAL, state), value
        assert read.state == state_of(read.status)
        assert read.reported_at_ms == int(datetime(2026, 1, 1, 12, tzinfo=UTC).timestamp()
                                          * 1000)
    for value in (1, 6, 7):  # ENROUTE, ACCEPTED, UNKNOWN: still pending, no state
        assert read_answer(_resp(value, final_date="")).said is Said.PENDING


def test_unknown_ids_and_bad_answers_are_attempts() -> None:
    for status in (ESME_RQUERYFAIL, ESME_RINVMSGID):
        assert read_answer(query_sm_resp(1, status)).said is Said.UNKNOWN_ID
        assert read_answer(pdu.generic_nack(1, status)).said is Said.UNKNOWN_ID
    bad = [_resp(9), _resp(0), _resp(2, final_date=""), _resp(2, final_date="2601011200"),
           _resp(2, final_date="260101120000000R"), _resp(2, final_date="260101120000049+"),
           _resp(2, final_date="261301120000000+"), query_sm_resp(1, 0x58),
           pdu.generic_nack(1, 0x03), _resp(2)[:-2], pdu.submit_sm_resp(1, 0, "X")]
    for frame in bad:
        read = read_answer(frame)
        assert read.said is Said.ERROR and read.why, frame.hex()


def test_final_date_is_an_absolute_time_with_its_offset() -> None:
    utc = absolute_time_ms("260101120000300+")
    assert utc == int(datetime(2026, 1, 1, 12, tzinfo=UTC).timestamp() * 1000) + 300
    assert absolute_time_ms("260101150000012+") == utc - 300  # 3 hours ahead of UTC
    assert absolute_time_ms("260101080000016-") == utc - 300  # 4 hours behind


def test_a_message_is_final_only_when_every_part_asked_is() -> None:
    f, p, u, e = (PullVerdict.FINAL, PullVerdict.PENDING, PullVerdict.UNKNOWN_ID,
                  PullVerdict.ERROR)
    assert message_verdict([f, f]) is f
    assert message_verdict([f, p]) is p
    assert message_verdict([f, u, p]) is u
    assert message_verdict([e, u, f]) is e
    assert message_verdict([]) is u


def test_an_id_is_spelled_as_the_smsc_wrote_it() -> None:
    ids = IdReader("auto")
    for written in ("00001A2B", "N1", "00002b"):
        assert ids.spelling(ids.submit_key(written)) == written
    upper = IdReader("hex")
    upper.submit_key("0000FFFF")
    assert upper.spelling("6699") == "00001A2B"  # not remembered: the latest ids' shape
    plain = IdReader("decimal")
    plain.submit_key("12")
    assert plain.spelling("345") == "345"


def _provider(port: int) -> tuple[SmppTransport, SmppStatusQuery]:
    transport = SmppTransport(settings_for(port))
    query = SmppStatusQuery(ProviderSettings(name="smsc", kind="smpp"), transport,
                            lambda: int(time.time() * 1000))
    return transport, query


def _target(ref: str, parts: tuple[PartOutcome, ...]) -> PullTarget:
    return PullTarget(ref=ref, provider_msg_id=None, msisdn="+905321234567",
                      submitted_at_ms=0,
                      parts=tuple(PartTarget(p.part, p.provider_msg_id, "SUBMITTED")
                                  for p in parts))


def test_the_built_in_smsc_answers_query_sm_with_its_receipts_off() -> None:
    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=5, silent_rate=1.0, delivered_rate=0.5,
                                          ids="hex-counting"))
        transport, query = _provider(await sim.start())
        assert not query.ready()
        await transport.start()
        try:
            assert await transport.session.wait_bound(5)
            assert query.ready()
            out = await transport.submit(OutgoingMessage(
                "long", "+905321234567", LONG, "", encoding=segment(LONG).encoding))
            assert out.result is SubmitResult.ACCEPTED and len(out.parts) == 3
            target = _target("long", out.parts)
            answers = await query.ask([target])
            finals = sim.stats.finals
            assert len(answers.replies) == 3 and answers.verdicts == {"long": PullVerdict.FINAL}
            for reply, part in zip(answers.replies, out.parts, strict=True):
                (report,) = reply.answer.reports
                assert report.provider_msg_id == part.provider_msg_id and report.final
                smsc_id = transport.session.ids.spelling(str(part.provider_msg_id))
                assert report.state == state_of(finals[smsc_id])
                assert reply.query == f"message_id={smsc_id}&part={part.part}"
                assert read_answer(reply.body).said is Said.FINAL  # the PDU, kept as it came
            assert sum(sim.book.asked.values()) == 3 and not sim.stats.receipts_written
            # A part already final is not asked again; an id the SMSC never issued is an
            # unknown id, a part without an id cannot be asked: attempts, no report.
            done = PartTarget(1, out.parts[0].provider_msg_id, "DELIVERED")
            odd = PullTarget("odd", None, "+905321234567", 0, parts=(
                done, PartTarget(2, "999", "SUBMITTED"), PartTarget(3, None, "UNCERTAIN")))
            answers = await query.ask([odd])
            assert answers.verdicts == {"odd": PullVerdict.UNKNOWN_ID}
            (reply,) = answers.replies
            assert reply.answer.reports == () and pdu.header(reply.body).status == ESME_RQUERYFAIL
            assert sum(sim.book.asked.values()) == 4
        finally:
            await transport.close()
            await sim.stop()
        # A session that is not bound asks nothing.
        assert not query.ready()
        assert (await query.ask([target])).verdicts == {"long": PullVerdict.ERROR}

    run(body())


def test_node_smpp_answers_query_sm(node_smsc: NodeSmsc) -> None:
    async def body() -> None:
        transport, query = _provider(node_smsc.port)
        await transport.start()
        try:
            assert await transport.session.wait_bound(5)
            out = await transport.submit(OutgoingMessage("a", "+905320000010", "hello", ""))
            assert out.result is SubmitResult.ACCEPTED
            answers = await query.ask([_target("a", out.parts),
                                       _target("b", (PartOutcome(1, SubmitResult.ACCEPTED,
                                                                 "n999"),))])
            assert answers.verdicts == {"a": PullVerdict.FINAL, "b": PullVerdict.UNKNOWN_ID}
            (report,) = answers.replies[0].answer.reports
            assert (report.state, report.status) == ("DELIVERED", "DELIVRD")
            assert report.reported_at_ms > 0
            asked = node_smsc.seen("query", 2)
            # node-smpp read our query_sm: the id as it answered it, our source address.
            assert [(q["message_id"], q["source_addr"]) for q in asked] == [
                ("N1", "ACME"), ("N999", "ACME")]
        finally:
            await transport.close()

    run(body())


def test_query_sm_is_off_until_the_table_says_pull(tmp_path: Path) -> None:
    table = ('[providers.smsc]\nkind = "smpp"\nhost = "127.0.0.1"\nport = 2775\n'
             'system_id = "appliance"\npassword = "x"\nsource_addr = "ACME"\n')

    def lanes(extra: str) -> list[str]:
        cfg = tmp_path / "c.toml"
        cfg.write_text(table + extra)
        settings = load_settings(cfg, env={})
        check_providers(settings)
        return [lane.name for lane in lanes_of(Providers(settings, KINDS), KINDS)]

    assert lanes("") == [] and lanes("pull = false\n") == []
    assert lanes("pull = true\npull_after_s = 60\npull_rate_per_s = 5\n") == ["smsc"]
    for key in ("requests_per_s = 2", "batch_max = 5"):
        with pytest.raises(ConfigError, match=key.split()[0]):
            lanes(f"pull = true\n{key}\n")


def test_the_shape_of_the_ids_is_kept_across_starts(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "appliance.db"))
    try:
        before = IdReader("auto")
        for written in ("0A0000FF", "1B2C3D4E"):
            before.submit_key(written)
        assert before.shape == IdShape(upper=True, width=8)
        store.writer.call(lambda c: save_shape(c, "smsc", before.shape, 1))
        kept = store.readers.call(lambda c: load_shape(c, "smsc"))
        after = IdReader("auto", IdEvidence(submit_hex=True), kept)
        assert after.spelling(str(0x00ABCDEF)) == "00ABCDEF"  # not seen by this process
        assert store.readers.call(lambda c: load_shape(c, "other")) == IdShape()
    finally:
        store.close()
