"""ENC-1 over SMPP: data_coding 0, the shift elements beside the concatenation element,
and the built-in SMSC reading the text back whole."""

from __future__ import annotations

import codecs

import gsmcodecs

from appliance.message_text.alphabets import TURKISH_BOTH, TURKISH_LOCKING, TURKISH_SINGLE
from appliance.message_text.segments import segment
from appliance.providers.base import OutgoingMessage, SubmitResult
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp import pdu
from appliance.smpp.deliver import header_elements, read_deliver, shift_tables, split_udh
from appliance.smpp.encoding import ESM_CLASS_UDHI, encode_parts
from appliance.smpp.ids import IdReader
from appliance.smpp.transport import SmppTransport
from tests.smpp.support import run, settings_for, wait_until

TEXT = ("Sayın Ayşe Yılmaz, kışlık ürünlerde %30 indirim 31.12.2026'ya kadar geçerli! "
        "Ödeme kapıda. Mesaj almak istemiyorsanız RET yazıp 4609'a gönderin. ") * 2
assert gsmcodecs


def test_parts_carry_the_shift_element_beside_the_concatenation_element() -> None:
    seg = segment(TEXT, turkish=True)
    assert seg.encoding == "GSM-7 Turkish" and seg.count == 2
    parts = encode_parts(seg.parts, seg.encoding, 0x2A, seg.tables)
    codec = codecs.lookup("gsm23.038_1_1" if seg.tables == TURKISH_BOTH else
                          "gsm23.038_1_0" if seg.tables == TURKISH_LOCKING else "gsm23.038_0_1")
    read = ""
    for seq, p in enumerate(parts, start=1):
        assert (p.data_coding, p.esm_class) == (0, ESM_CLASS_UDHI)
        udh_len = p.short_message[0]
        elements = header_elements(p.esm_class, p.short_message)
        assert elements[0x00] == bytes((0x2A, 2, seq))
        assert {k: v for k, v in elements.items() if k} == {
            iei: b"\x01" for iei, _ in seg.tables.header_elements}
        assert udh_len == 5 + 3 * len(seg.tables.header_elements)
        body = p.short_message[1 + udh_len:]
        assert all(b < 0x80 for b in body)  # unpacked septets, one an octet
        read += codec.decode(body)[0]
    assert read == TEXT


def test_one_part_carries_the_shift_element_alone() -> None:
    seg = segment("Merhaba Ayşe, siparişiniz yolda.", turkish=True)
    assert seg.tables == TURKISH_SINGLE and seg.count == 1
    (p,) = encode_parts(seg.parts, seg.encoding, 7, seg.tables)
    assert p.esm_class == ESM_CLASS_UDHI and p.short_message[:4] == b"\x03\x24\x01\x01"
    assert shift_tables(p.esm_class, p.short_message) == TURKISH_SINGLE
    assert split_udh(p.esm_class, p.short_message)[1] is None


def test_the_built_in_smsc_reads_the_text_back_whole() -> None:
    async def body() -> None:
        sim = SmscSimulator(SmscBehaviour(seed=3, delay_min_ms=0, delay_max_ms=0))
        port = await sim.start()
        t = SmppTransport(settings_for(port))
        await t.start()
        try:
            texts = [TEXT, "ş" * 300, "Fiyat 100₺ çok uygun", "Plain {text} €"]
            for i, text in enumerate(texts):
                enc = segment(text, turkish=True).encoding
                out = await t.submit(OutgoingMessage(f"ref{i}", "+905321234567", text, "",
                                                     encoding=enc))
                assert out.result is SubmitResult.ACCEPTED
                assert len(out.parts) == segment(text, turkish=True).count
            await wait_until(lambda: len(sim.stats.texts) == len(texts), what="texts")
            assert sorted(t for _, t in sim.stats.texts) == sorted(texts)
        finally:
            await t.close()
            await sim.stop()

    run(body())


def test_an_inbound_message_in_the_turkish_tables_reads_right() -> None:
    text = "İptal için RET yazdım, teşekkürler"
    seg = segment(text, turkish=True)
    (p,) = encode_parts(seg.parts, seg.encoding, 1, seg.tables)
    frame = pdu.deliver_sm(7, source_addr="905321234567", destination_addr="4609",
                           esm_class=p.esm_class, short_message=p.short_message)
    d = read_deliver("smsc", frame, IdReader("auto"), 0)
    assert (d.is_receipt, d.text, d.concat) == (False, text, None)
