"""``kind = "smpp"`` as a provider: the table, the parts, and what each segment came to.

The transport runs against the built-in SMSC in this process (its own event loop);
``config check`` runs as the real command.
"""

from __future__ import annotations

from pathlib import Path

from appliance.config import ConfigError, ProviderSettings
from appliance.message_text.segments import segment
from appliance.provider_kinds import KINDS, load_settings
from appliance.providers.base import OutgoingMessage, SubmitResult
from appliance.providers.registry import Providers
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp.deliver import Deliver, split_udh
from appliance.smpp.ids import key
from appliance.smpp.kind import smpp_settings
from appliance.smpp.receipt import STAT_STATES
from appliance.smpp.settings import KEYS
from appliance.smpp.status import ESME_RX_T_APPN
from appliance.smpp.submission import LateResponse
from appliance.smpp.transport import SmppTransport
from tests.harness import run_cli
from tests.smpp.support import run, settings_for, wait_until

LONG = "Değerli müşterimiz, kampanyamız başladı: tüm ürünlerde indirim! " * 3
TABLE = """
[providers.smsc]
kind = "smpp"
host = "127.0.0.1"
port = 2775
system_id = "appliance"
password = "hunter2"
source_addr = "ACME"
window = 7
rate_per_s = 40
"""


def test_the_provider_is_its_session_transport_and_reports_per_part(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TABLE)
    provider = Providers(load_settings(cfg, env={}), KINDS).get("smsc")
    assert provider is not None and isinstance(provider.transport, SmppTransport)
    assert (provider.reports, provider.inbound) == (None, None)
    assert provider.reports_per_part and provider.reports_by_provider_id_only
    assert not provider.dedupes_on_ref
    assert provider.transport.concurrency == 7
    assert provider.transport.settings.rate_per_s == 40


def test_config_check_names_every_mistake_and_masks_the_password(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(TABLE)
    shown = run_cli("config", "check", "--config", str(good), "--data-dir",
                    str(tmp_path / "d")).stdout
    assert "hunter2" not in shown and '"password": "***"' in shown.replace("'", '"')
    bad = tmp_path / "bad.toml"
    bad.write_text(TABLE.replace('port = 2775', 'port = 0').replace(
        'window = 7', 'window = 0\nsender = "ACME"\nsourse_addr = "x"'))
    done = run_cli("config", "check", "--config", str(bad), "--data-dir",
                   str(tmp_path / "d"), check=False)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    for mistake in ("[providers.smsc] sender: not a setting of kind \"smpp\" (use source_addr)",
                    "[providers.smsc] sourse_addr: unknown setting",
                    "[providers.smsc] port: expected a whole number from 1 to 65535",
                    "[providers.smsc] window: expected a whole number from 1"):
        assert mistake in line, line
    assert "hunter2" not in line


def test_segments_parts_ids_and_skip_parts() -> None:
    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=2, delay_min_ms=0, delay_max_ms=0,
                                          silent_rate=1.0))
        port = await sim.start()
        t = SmppTransport(settings_for(port))
        await t.start()
        try:
            seg = segment(LONG)
            assert seg.count == 3
            out = await t.submit(OutgoingMessage("ref1", "+905321234567", LONG, ""))
            assert out.result is SubmitResult.ACCEPTED
            assert [p.part for p in out.parts] == [1, 2, 3]
            ids = {k: mid for k, mid in sim.stats.accepted.items()}
            got = {split_udh(0x40, k[1])[1]: key(mid, "hex") for k, mid in ids.items()}
            assert {c[2]: v for c, v in got.items() if c} == {
                p.part: p.provider_msg_id for p in out.parts}  # MSG-3, canonical ids
            # A later attempt sends only the parts not skipped, each in its place.
            again = await t.submit(OutgoingMessage("ref1", "+905321234567", LONG, "",
                                                   skip_parts=frozenset({1, 3})))
            assert [p.part for p in again.parts] == [2]
            # The same bytes again, UDH included (part 2 of 3, the message's reference),
            # and nothing else.
            assert sorted((k[1][4:6], n) for k, n in sim.stats.received.items()) == [
                (b"\x03\x01", 1), (b"\x03\x02", 2), (b"\x03\x03", 1)]
            assert len({k[1][3] for k in sim.stats.received}) == 1
        finally:
            await t.close()
            await sim.stop()

    run(body())


def test_what_each_answer_comes_to() -> None:
    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=2, delay_min_ms=0, delay_max_ms=0,
                                          reject_rate=1.0, silent_rate=1.0))
        port = await sim.start()
        t = SmppTransport(settings_for(port))
        await t.start()
        try:
            rejected = await t.submit(OutgoingMessage("r", "+905321234567", "hi", ""))
            assert rejected.result is SubmitResult.REJECTED
            assert rejected.parts[0].error == "smpp ESME_RINVDSTADR (0x0000000B)"
            nowhere = await t.submit(OutgoingMessage("r2", "not a number", "hi", ""))
            assert nowhere.result is SubmitResult.REJECTED and not nowhere.parts
            assert sim.stats.submits == 1  # nothing was written for it
        finally:
            await t.close()
            await sim.stop()
        sim2 = SmscSimulator(SmscBehaviour(seed=2, throttle_rate=1.0))
        port2 = await sim2.start()
        t2 = SmppTransport(settings_for(port2))
        await t2.start()
        try:
            throttled = await t2.submit(OutgoingMessage("r3", "+905321234567", "hi", ""))
            assert throttled.result is SubmitResult.RETRY
            assert throttled.parts[0].retry_after_s == 1.0
            assert not throttled.unreached  # the SMSC answered: an attempt that counts
        finally:
            await t2.close()
            await sim2.stop()

    run(body())


def test_no_session_is_an_outage_not_a_refusal() -> None:
    """Nothing listens: the segment is never written, and the outcome says the provider
    was not reached, so the sender holds the lane and does not count the attempt."""
    async def body() -> None:
        from tests.harness import free_port

        t = SmppTransport(settings_for(free_port(), bound_wait_s=0.2))
        await t.start()
        try:
            out = await t.submit(OutgoingMessage("r", "+905321234567", "hi", ""))
            assert out.result is SubmitResult.RETRY and out.unreached
        finally:
            await t.close()

    run(body())


def test_a_deliver_sm_before_anything_can_store_it_is_answered_temporary() -> None:
    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=2, delay_min_ms=0, delay_max_ms=0,
                                          redeliver_ms=50))
        port = await sim.start()
        t = SmppTransport(settings_for(port))
        await t.start()
        try:
            await t.submit(OutgoingMessage("r", "+905321234567", "hi", ""))
            await wait_until(lambda: sim.stats.deliver_statuses[ESME_RX_T_APPN] >= 1,
                             what="a temporary error")

            class Sink:
                def __init__(self) -> None:
                    self.got: list[Deliver] = []

                async def deliver(self, d: Deliver) -> bool:
                    self.got.append(d)
                    return True

                async def late_response(self, late: LateResponse) -> None:
                    return None

                def uncertain(self, ref: str, part: int) -> None:
                    return None

            sink = Sink()
            t.attach(sink)
            await wait_until(lambda: sink.got, what="delivered again once attached")
        finally:
            await t.close()
            await sim.stop()

    run(body())


def test_inapplicable_settings_are_refused_by_name() -> None:
    base = {"host": "h", "port": 1, "system_id": "s", "password": "p", "source_addr": "A"}
    ok = smpp_settings(ProviderSettings(name="x", kind="smpp", options=base))
    assert ok.source().addr == "A"
    for change, word in ((dict(dedupes_on_ref=True), "dedupes_on_ref"),
                         (dict(base_url="http://x"), "base_url"),
                         (dict(concurrency=3), "use window")):
        try:
            smpp_settings(ProviderSettings(name="x", kind="smpp", options=base,
                                           **change))
        except ConfigError as exc:
            assert word in str(exc)
        else:
            raise AssertionError(f"{change} accepted")


def test_the_docs_name_every_key_and_status_word() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    section = doc[doc.index("## `smpp`"):]
    for name in KEYS:
        assert f"\n{name} = " in section or f"# {name} = " in section, name
    for word in STAT_STATES:
        if word not in ("DELIVERED", "UNDELIVERABLE", "REJECTED", "ACCEPTED"):
            assert f"`{word}`" in section, word
    sample = (Path(__file__).resolve().parents[2] / "packaging" / "appliance.toml").read_text()
    for name in KEYS:
        assert f"# {name} = " in sample, name
