"""Our SMPP client against node-smpp's server (npm ``smpp``): an SMSC we did not write.

Plain GSM-7 and UCS-2 (bind, submit, receipt) and, ENC-1, GSM-7 Turkish: the bytes it
received are read back here with ``gsmcodecs`` (another implementation of TS 23.038),
and node-smpp's own reading of the UDH and the text is checked beside them.
"""

from __future__ import annotations

import codecs

import gsmcodecs
import pytest

from appliance.message_text.alphabets import TURKISH_BOTH, TURKISH_LOCKING, TURKISH_SINGLE
from appliance.message_text.segments import segment
from appliance.providers.base import OutgoingMessage, SubmitResult
from appliance.smpp.addresses import destination
from appliance.smpp.deliver import Deliver
from appliance.smpp.session import SmppSession
from appliance.smpp.submission import segments
from appliance.smpp.transport import SmppTransport
from tests.smpp.node_peer import NodeSmsc, node_smsc
from tests.smpp.support import Store, message, run, settings_for, wait_until

__all__ = ["node_smsc"]
assert gsmcodecs  # registers the gsm23.038 codecs

CODECS = {TURKISH_SINGLE: "gsm23.038_0_1", TURKISH_LOCKING: "gsm23.038_1_0",
          TURKISH_BOTH: "gsm23.038_1_1"}


def _read_back(e: dict[str, object]) -> tuple[dict[int, bytes], bytes]:
    """(UDH elements, the rest) of a short_message as the peer received it."""
    data = bytes.fromhex(str(e["short_message"]))
    if not int(str(e["esm_class"])) & 0x40:
        return {}, data
    udh, rest = data[1:1 + data[0]], data[1 + data[0]:]
    elements: dict[int, bytes] = {}
    at = 0
    while at < len(udh):
        elements[udh[at]] = udh[at + 2:at + 2 + udh[at + 1]]
        at += 2 + udh[at + 1]
    return elements, rest


def test_gsm7_and_ucs2_bind_submit_and_receipt(node_smsc: NodeSmsc) -> None:
    store = Store()

    async def body() -> None:
        session = SmppSession(settings_for(node_smsc.port, enquire_link_s=0.2),
                              store.on_deliver)
        await session.start()
        try:
            assert await session.wait_bound(5), session.state()
            segs = (message("a", "hello world {ok} €5") + message("b", "İptal için DUR " * 6))
            outs = await session.submit(segs)
            assert {o.result for o in outs} == {SubmitResult.ACCEPTED}
            await wait_until(lambda: len(store.receipt_keys()) == len(segs), timeout=10,
                             what="receipts")
        finally:
            await session.stop()
        submits = {e["id"]: e for e in node_smsc.seen("submit", len(segs))}
        assert len(submits) == len(segs)
        for seg, out in zip(segs, outs, strict=True):
            e = submits[out.message_id or ""]
            assert bytes.fromhex(e["short_message"]) == seg.short_message
            assert (e["esm_class"], e["data_coding"], e["registered_delivery"]) == (
                seg.esm_class, seg.data_coding, 1)
            assert (e["destination"], e["dest_ton"], e["source"]) == (
                "905321234567", 1, "ACME")
        # node-smpp read the GSM-7 text and the UCS-2 parts as we meant them.
        gsm = submits[outs[0].message_id or ""]
        assert gsm["node_text"] == "hello world {ok} €5"
        ucs2 = [submits[o.message_id or ""] for o in outs[1:]]
        assert "".join(e["node_text"] for e in ucs2) == "İptal için DUR " * 6
        assert all(len(e["node_udh"]) == 1 and e["node_udh"][0][:4] == "0003" for e in ucs2)
        assert sorted(store.receipt_keys()) == sorted(o.id_key or "" for o in outs)
        assert all(isinstance(d, Deliver) and d.receipt and d.receipt.state == "DELIVERED"
                   for d in store.stored)

    run(body())


TEXTS = [
    "Merhaba Ayşe, siparişiniz yolda.",  # one part, the single shift alone
    ("Sayın Ayşe Yılmaz, kışlık ürünlerde %30 indirim 31.12.2026'ya kadar geçerli! Ödeme"
     " kapıda. Mesaj almak istemiyorsanız RET yazıp 4609'a gönderin. ") * 2,
    "ğüşıöç" * 60,  # the locking shift: Turkish letters everywhere
    "è " + "ş{€}" * 45,  # è keeps the default table: single shift, escapes at boundaries
]


@pytest.mark.parametrize("text", TEXTS, ids=["one", "campaign", "locking", "escapes"])
def test_turkish_bytes_as_the_smsc_received_them(node_smsc: NodeSmsc, text: str) -> None:
    seg = segment(text, turkish=True)
    assert seg.encoding == "GSM-7 Turkish"

    async def body() -> None:
        t = SmppTransport(settings_for(node_smsc.port))
        await t.start()
        try:
            out = await t.submit(OutgoingMessage("T1", "+905321234567", text, "",
                                                 encoding=seg.encoding))
            assert out.result is SubmitResult.ACCEPTED and len(out.parts) == seg.count
        finally:
            await t.close()

    run(body())
    got = node_smsc.seen("submit", seg.count)
    assert len(got) == seg.count
    codec = codecs.lookup(CODECS[seg.tables])
    by_seq: dict[int, str] = {}
    for e in got:
        assert e["data_coding"] == 0 and e["esm_class"] & 0x40
        elements, rest = _read_back(e)
        assert {k: v for k, v in elements.items() if k in (0x24, 0x25)} == {
            iei: bytes((lang,)) for iei, lang in seg.tables.header_elements}
        seq = elements[0x00][2] if 0x00 in elements else 1
        if seg.count > 1:
            assert elements[0x00][1] == seg.count
        by_seq[seq] = codec.decode(rest)[0]  # strict: a split escape would raise here
        # node-smpp reads the shift elements too (it applies Turkish tables to both).
        assert any(u[:2] in ("24", "25") for u in e["node_udh"])
        if seg.tables == TURKISH_BOTH or not set(rest) & {0x04, 0x07, 0x0B, 0x0C, 0x1C,
                                                          0x1D, 0x40, 0x60}:
            assert e["node_text"] == by_seq[seq]
    joined = "".join(by_seq[i] for i in sorted(by_seq))
    assert joined == text
    # What the segments would be made of, byte for byte.
    expected = segments("T1", destination("+905321234567"), settings_for(1).source(),
                        seg.encoding, seg.parts, tables=seg.tables)
    assert sorted(bytes.fromhex(e["short_message"]) for e in got) == sorted(
        s.short_message for s in expected)
