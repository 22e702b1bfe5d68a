"""ENC-1 per kind: each kind uses only the Turkish tables it can signal, and the parts
shown at acceptance are the parts its wire request implies (what the provider bills).

SMPP signals either shift table in the header; Verimor's ``datacoding`` 1 is the
locking shift alone and counts ``€`` twice, by size ("SMS BOY KARAKTER LİMİTLERİ");
Netgsm's ``encoding`` ``TR`` is one table its reference does not name, counted as the
costlier. The fakes (written from each provider's reference, not from our client) count
the parts of what they receive; the settings are read from a config file as ``serve``
reads them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from appliance.config import Settings
from appliance.message_text.alphabets import (
    IEI_LOCKING_SHIFT,
    IEI_SINGLE_SHIFT,
    PLAIN,
    TURKISH_LOCKING,
    TURKISH_SINGLE,
)
from appliance.message_text.segments import Segmentation, segment, segment_as
from appliance.provider_kinds import load_settings
from appliance.providers import OutgoingMessage
from appliance.providers.netgsm_codes import ENCODING
from appliance.providers.verimor_codes import DATACODING
from appliance.simulator import netgsm_fake, verimor_fake
from appliance.smpp.encoding import encode_parts
from bench.turkish_corpus import corpus
from tests.providers import netgsm_support, test_verimor_wire
from tests.providers.provider_test_support import message

TO = "+905321234567"
EURO = "Şimdi 5€ indirim, kaçırmayın!"  # a Turkish letter and €
GRAVE = "Şefin crème karamel tatlısı bugün"  # a Turkish letter and è
EUROS = "€" * 100  # no Turkish letter: the locking shift's € saves a part, if one-septet

CONFIG = """
[providers.smsc]
kind = "smpp"
host = "127.0.0.1"
system_id = "s"
password = "p"
national_language = "turkish"
[providers.vr]
kind = "verimor"
base_url = "http://127.0.0.1:9"
username = "908501234567"
password = "p"
national_language = "turkish"
[providers.ng]
kind = "netgsm"
base_url = "http://127.0.0.1:9"
usercode = "u"
password = "p"
national_language = "turkish"
"""


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    path: Path = tmp_path_factory.mktemp("kinds") / "cfg.toml"
    path.write_text(CONFIG)
    return load_settings(path, env={})


@pytest.fixture(scope="module")
def verimor() -> Iterator[tuple[verimor_fake.VerimorFake, str]]:
    fake = verimor_fake.VerimorFake(credit=10_000_000)
    with verimor_fake.RunningFake(fake) as running:
        yield fake, running.base_url


@pytest.fixture(scope="module")
def netgsm() -> Iterator[tuple[netgsm_fake.NetgsmFake, str]]:
    fake = netgsm_fake.NetgsmFake(credit=10_000_000.0)
    with netgsm_fake.RunningFake(fake) as running:
        yield fake, running.base_url


def seg_of(settings: Settings, provider: str, text: str, to: str = TO) -> Segmentation:
    """The segmentation accepted for ``text`` to ``to`` through ``provider``."""
    return segment(text, settings.providers[provider].counting_to(to))


def outgoing(text: str, seg: Segmentation, to: str = TO, ref: str = "R1") -> OutgoingMessage:
    return replace(message(ref=ref, msisdn=to, body=text), encoding=seg.encoding)


CLIENT = httpx.Client(timeout=10)  # one connection to each fake: hundreds of requests


@pytest.fixture(scope="module", autouse=True)
def _client_closed() -> Iterator[None]:
    yield
    CLIENT.close()


def verimor_parts(fake: verimor_fake.VerimorFake, url: str, msg: OutgoingMessage
                  ) -> tuple[str, int]:
    """The ``datacoding`` the request carried and the parts the fake counted."""
    request = test_verimor_wire.adapter(base_url=url).build_request(msg)
    response = CLIENT.send(request)
    assert response.status_code == 200, response.text
    [made] = fake.campaigns[int(response.text)]
    return str(json.loads(request.content)["datacoding"]), made.size


def netgsm_parts(fake: netgsm_fake.NetgsmFake, url: str, msg: OutgoingMessage
                 ) -> tuple[str, int]:
    """The ``encoding`` the request carried and the parts the fake counted."""
    response = CLIENT.send(netgsm_support.adapter(url).build_request(msg))
    assert response.text.startswith("00 "), response.text
    task = fake.tasks[int(response.text.split()[1])]
    [(_, _, size)] = task.numbers.values()
    return fake.sends[-1]["encoding"], int(size)


def smpp_wire(seg: Segmentation, text: str) -> set[int]:
    """The shift elements (IEI, value 0x01 Turkish) every SMPP part's header carries; the
    wire is the appliance's own parts, as accepted (``segment_as``), one PDU each."""
    sent = segment_as(text, seg.encoding)
    assert (sent.count, sent.tables) == (seg.count, seg.tables)
    encoded = encode_parts(sent.parts, "UCS-2" if sent.encoding == "UCS-2" else "GSM-7", 1,
                           sent.tables)
    assert len(encoded) == seg.count
    shifts: list[set[int]] = []
    for part in encoded:
        found: set[int] = set()
        if part.esm_class & 0x40:
            header = part.short_message[1:1 + part.short_message[0]]
            i = 0
            while i < len(header):
                iei, size = header[i], header[i + 1]
                if iei in (IEI_SINGLE_SHIFT, IEI_LOCKING_SHIFT):
                    assert header[i + 2:i + 2 + size] == b"\x01"
                    found.add(iei)
                i += 2 + size
        shifts.append(found)
    assert all(s == shifts[0] for s in shifts)
    return shifts[0]


def test_the_kinds_declare_the_tables_they_signal_and_how_they_count(
        settings: Settings) -> None:
    smsc, vr, ng = (settings.providers[n].counting for n in ("smsc", "vr", "ng"))
    assert smsc.tables == (TURKISH_SINGLE, TURKISH_LOCKING) and smsc.whole_escapes
    assert vr.tables == (TURKISH_LOCKING,) and "€" in vr.twice and not vr.whole_escapes
    assert ng.tables == (TURKISH_SINGLE,) and set("èìØøÆæ¡¿") <= ng.unwritten
    # Abroad, none of them uses the tables (Verimor forbids its switch there).
    for name in ("smsc", "vr", "ng"):
        assert seg_of(settings, name, EURO, "+4915112345678").encoding == "UCS-2"


def test_a_text_with_euro_goes_in_each_kinds_table_counted_as_it_bills(
        settings: Settings, verimor: tuple[verimor_fake.VerimorFake, str],
        netgsm: tuple[netgsm_fake.NetgsmFake, str]) -> None:
    smsc = seg_of(settings, "smsc", EURO)
    assert (smsc.encoding, smsc.tables, smsc.count) == ("GSM-7 Turkish", TURKISH_SINGLE, 1)
    assert smpp_wire(smsc, EURO) == {IEI_SINGLE_SHIFT}
    vr = seg_of(settings, "vr", EURO)
    assert (vr.encoding, vr.tables) == ("GSM-7 Turkish", TURKISH_LOCKING)
    assert vr.units == len(EURO) + 1  # € counted twice, as Verimor's Not-1 says
    assert verimor_parts(*verimor, outgoing(EURO, vr)) == (DATACODING[vr.encoding], vr.count)
    ng = seg_of(settings, "ng", EURO)
    assert (ng.encoding, ng.tables) == ("GSM-7 Turkish", TURKISH_SINGLE)
    assert netgsm_parts(*netgsm, outgoing(EURO, ng)) == ("TR", ng.count)
    # Many € and no Turkish letter: SMPP's locking shift writes € in one septet and
    # saves a part; Verimor and Netgsm count € as two whatever the table: GSM-7.
    smsc = seg_of(settings, "smsc", EUROS)
    assert (smsc.encoding, smsc.tables, smsc.count) == ("GSM-7 Turkish", TURKISH_LOCKING, 1)
    for name in ("vr", "ng"):
        seg = seg_of(settings, name, EUROS)
        assert (seg.encoding, seg.tables, seg.count) == ("GSM-7", PLAIN, 2)
    assert verimor_parts(*verimor, outgoing(EUROS, seg_of(settings, "vr", EUROS))) == ("0", 2)
    assert netgsm_parts(*netgsm, outgoing(EUROS, seg_of(settings, "ng", EUROS))) == ("", 2)


def test_a_text_with_e_grave_goes_ucs2_where_the_kinds_table_lacks_it_and_says_why(
        settings: Settings, verimor: tuple[verimor_fake.VerimorFake, str],
        netgsm: tuple[netgsm_fake.NetgsmFake, str]) -> None:
    smsc = seg_of(settings, "smsc", GRAVE)
    assert (smsc.encoding, smsc.tables, smsc.count) == ("GSM-7 Turkish", TURKISH_SINGLE, 1)
    # Verimor's datacoding 1 is the locking shift, where è has no place: UCS-2.
    vr = seg_of(settings, "vr", GRAVE)
    assert (vr.encoding, vr.ucs2_because, vr.count) == ("UCS-2", "è", 1)
    assert verimor_parts(*verimor, outgoing(GRAVE, vr)) == ("2", 1)
    ng = seg_of(settings, "ng", GRAVE)
    assert (ng.encoding, ng.ucs2_because) == ("UCS-2", "è")
    assert netgsm_parts(*netgsm, outgoing(GRAVE, ng)) == ("", ng.count)
    assert ENCODING.get(ng.encoding, "") == ""


def test_a_long_text_over_smpp_carries_the_shift_element_of_its_table(
        settings: Settings) -> None:
    text = (GRAVE + " ") * 6
    seg = seg_of(settings, "smsc", text)
    assert (seg.encoding, seg.tables) == ("GSM-7 Turkish", TURKISH_SINGLE) and seg.count > 1
    assert smpp_wire(seg, text) == {IEI_SINGLE_SHIFT}
    turkish = "Şişçi ışığı " * 20  # the letters in one septet save a part
    seg = seg_of(settings, "smsc", turkish)
    assert seg.tables == TURKISH_LOCKING and smpp_wire(seg, turkish) == {IEI_LOCKING_SHIFT}


def test_the_parts_shown_are_the_parts_each_aggregator_counts_for_a_campaign_corpus(
        settings: Settings, verimor: tuple[verimor_fake.VerimorFake, str],
        netgsm: tuple[netgsm_fake.NetgsmFake, str]) -> None:
    """300 of the benchmark's Turkish campaign texts (``₺``, ``â`` and all), and the
    same with ``{`` and ``€`` at every place a part could end: for each, the parts the
    appliance shows for Verimor and Netgsm equal the parts each fake counts for the
    request the kind sends."""
    texts = corpus(300, seed=29)
    texts += [t[:i] + "{€" + t[i:] for t in texts[:20] for i in range(140, 160, 3)
              if len(t) > i]
    for i, text in enumerate(texts):
        to = f"+9053{i:08d}"
        vr = seg_of(settings, "vr", text, to)
        assert verimor_parts(*verimor, outgoing(text, vr, to, f"V{i}")) == (
            DATACODING[vr.encoding], vr.count), text
        ng = seg_of(settings, "ng", text, to)
        assert netgsm_parts(*netgsm, outgoing(text, ng, to, f"N{i}")) == (
            ENCODING.get(ng.encoding, ""), ng.count), text
