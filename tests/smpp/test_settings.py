"""The ``kind = "smpp"`` table and address shapes."""

from __future__ import annotations

from typing import Any

import pytest
import smpp34

from appliance.config import ConfigError
from appliance.smpp import pdu
from appliance.smpp.addresses import Address, destination, from_shape
from appliance.smpp.settings import SmppSettings

GOOD = {"kind": "smpp", "host": "127.0.0.1", "port": 2775, "system_id": "appliance",
        "password": "secret", "source_addr": "ACME"}


def test_defaults_and_every_key() -> None:
    s = SmppSettings.from_table("smsc", GOOD)
    assert (s.bind, s.window, s.rate_per_s, s.enquire_link_s, s.receipt_id_format) == (
        "transceiver", 10, 50.0, 30.0, "auto")
    full = SmppSettings.from_table("smsc", {**GOOD, "system_type": "OTA",
                                            "bind": "transmitter+receiver", "window": 3,
                                            "rate_per_s": 5, "enquire_link_s": 10,
                                            "receipt_id_format": "hex", "source_ton": 2,
                                            "source_npi": 1, "source_addr": "4412"})
    assert full.source() == Address("4412", 2, 1)
    assert (full.bind, full.window, full.rate_per_s, full.receipt_id_format) == (
        "transmitter+receiver", 3, 5.0, "hex")


@pytest.mark.parametrize(("change", "message"), [
    ({"host": None}, "host: required"),
    ({"port": 0}, "port: expected a whole number"),
    ({"password": "toolongpw"}, "password: expected ASCII text of at most 8"),
    ({"system_id": ""}, "system_id: required"),
    ({"bind": "receiver"}, "bind: one of transceiver | transmitter+receiver"),
    ({"window": 0}, "window: expected a whole number from 1"),
    ({"rate_per_s": -1}, "rate_per_s: expected a number"),
    ({"receipt_id_format": "base64"}, "receipt_id_format: one of auto | hex"),
    ({"source_addr": "A VERY LONG NAME"}, "source_addr: "),
    ({"sourc_addr": "x"}, "sourc_addr: unknown setting"),
])
def test_mistakes_are_one_line_naming_the_key(change: dict[str, Any], message: str) -> None:
    table = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as err:
        SmppSettings.from_table("smsc", table)
    assert str(err.value).startswith("[providers.smsc] ") and message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("raw", "expected"), [
    ("ACME", Address("ACME", 5, 0)),
    ("+905321234567", Address("905321234567", 1, 1)),
    ("905321234567", Address("905321234567", 1, 1)),
    ("4412", Address("4412", 3, 0)),
])
def test_source_shapes(raw: str, expected: Address) -> None:
    assert from_shape(raw) == expected


def test_destinations_are_international() -> None:
    assert destination("+905321234567") == Address("905321234567", 1, 1)
    with pytest.raises(ValueError):
        destination("+90 532")


def test_control_pdus_read_back_with_the_codec_we_did_not_write() -> None:
    """Our hand-built control PDUs, decoded by smpp34 (a check on the header and lengths)."""
    for frame, command in [
        (pdu.bind(pdu.BIND_TRANSCEIVER, 7, system_id="appliance", password="secret"), 0x09),
        (pdu.submit_sm_resp(7, 0, "1A2B"), 0x80000004),
        (pdu.deliver_sm_resp(7, 0x64), 0x80000005),
        (pdu.enquire_link(7), 0x15),
        (pdu.unbind_resp(7), 0x80000006),
        (pdu.generic_nack(7, 3), 0x80000000),
    ]:
        raw = smpp34.decode(frame)
        assert isinstance(raw, smpp34.RawPdu)
        assert (raw.command_id, raw.sequence_number, raw.command_length) == (
            command, 7, len(frame))
    req = pdu.read_bind(pdu.bind(pdu.BIND_RECEIVER, 1, system_id="a", password="b",
                                 system_type="c"))
    assert (req.system_id, req.password, req.system_type, req.interface_version) == (
        "a", "b", "c", 0x34)
    assert pdu.read_message_id(pdu.submit_sm_resp(1, 0, "xyz")) == "xyz"
    assert pdu.read_message_id(pdu.submit_sm_resp(1, 0x58)) == ""  # errors carry no body
