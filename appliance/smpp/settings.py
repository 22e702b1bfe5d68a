"""A provider's ``kind = "smpp"`` table, read and checked (one line per mistake).

```toml
[providers.smsc]
kind = "smpp"
host = "127.0.0.1"
port = 2775
system_id = "appliance"
password = "secret"
system_type = ""
bind = "transceiver"        # transceiver | transmitter+receiver
source_addr = "ACME"        # TON/NPI chosen from its shape unless source_ton/source_npi are set
window = 10                 # outstanding submit_sm
rate_per_s = 50
enquire_link_s = 30
receipt_id_format = "auto"  # auto | hex | decimal | as-is
response_timeout_s = 30     # how long a submit_sm (enquire_link, unbind) waits for its answer
septets = "unpacked"        # unpacked | packed: how data_coding 0 text is laid out
```

The timing fields after ``response_timeout_s`` are not configuration keys: they have
protocol-sensible defaults and exist so tests can run a session quickly.

Every mistake in the table is reported, one ``[providers.NAME] key: why`` each, joined
by ``; `` on one line.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from appliance.config import ConfigError
from appliance.smpp.addresses import Address, from_shape
from appliance.smpp.encoding import SEPTET_LAYOUTS, SeptetLayout
from appliance.smpp.ids import ID_FORMATS, IdFormat

BindMode = Literal["transceiver", "transmitter+receiver"]
BIND_MODES: tuple[BindMode, ...] = ("transceiver", "transmitter+receiver")

KEYS = ("host", "port", "system_id", "password", "system_type", "bind", "source_addr",
        "source_ton", "source_npi", "window", "rate_per_s", "enquire_link_s",
        "receipt_id_format", "response_timeout_s", "septets")


@dataclass(frozen=True)
class SmppSettings:
    name: str
    host: str
    port: int
    system_id: str
    password: str
    system_type: str = ""
    bind: BindMode = "transceiver"
    source_addr: str = ""
    source_ton: int | None = None
    source_npi: int | None = None
    window: int = 10
    rate_per_s: float = 50.0
    enquire_link_s: float = 30.0
    receipt_id_format: IdFormat = "auto"
    response_timeout_s: float = 30.0  # submit_sm, enquire_link, unbind without an answer
    septets: SeptetLayout = "unpacked"  # GSM-7 one septet an octet, or packed
    # Not configuration keys (see the module docstring).
    bind_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    reconnect_min_s: float = 1.0
    reconnect_max_s: float = 60.0
    bound_wait_s: float = 5.0  # how long submit() waits for a bind before RETRY

    def source(self) -> Address:
        """``source_addr`` with its TON/NPI: from its shape, or as configured."""
        shaped = from_shape(self.source_addr)
        return Address(
            shaped.addr if self.source_ton is None else self.source_addr.strip(),
            shaped.ton if self.source_ton is None else self.source_ton,
            shaped.npi if self.source_npi is None else self.source_npi,
        )

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any], rate_per_s: float | None = None,
                   ignore: Collection[str] = ("kind",)) -> SmppSettings:
        """Settings from a provider's TOML table; keys in ``ignore`` belong to the caller.

        :class:`ConfigError` naming every bad key.
        """
        where = f"[providers.{name}]"
        problems: list[str] = []

        def fail(key: str, why: str) -> None:
            problems.append(f"{where} {key}: {why}")

        for key in table:
            if key not in KEYS and key not in ignore:
                fail(key, f"unknown setting for kind \"smpp\" (options: {', '.join(KEYS)})")

        def text(key: str, default: str | None, max_len: int) -> str:
            value = table.get(key, default)
            if value is None:
                fail(key, 'required for kind "smpp"')
                return ""
            if not isinstance(value, str) or not value.isascii() or len(value) > max_len:
                fail(key, f"expected ASCII text of at most {max_len} characters, got {value!r}")
                return ""
            return value

        def integer(key: str, default: int | None, lo: int, hi: int) -> int | None:
            value = table.get(key, default)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                fail(key, f"expected a whole number from {lo} to {hi}, got {value!r}")
                return default
            return value

        def number(key: str, default: float, lo: float) -> float:
            value = table.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < lo \
                    or not math.isfinite(value):
                fail(key, f"expected a number of at least {lo:g}, got {value!r}")
                return default
            return float(value)

        host = text("host", None, 255)
        if "host" in table and not host and isinstance(table["host"], str):
            fail("host", 'required for kind "smpp"')
        port = integer("port", None, 1, 65535)
        if port is None and "port" not in table:
            fail("port", 'required for kind "smpp"')
        bind = table.get("bind", "transceiver")
        if bind not in BIND_MODES:
            fail("bind", f"one of {' | '.join(BIND_MODES)}, got {bind!r}")
            bind = "transceiver"
        fmt = table.get("receipt_id_format", "auto")
        if fmt not in ID_FORMATS:
            fail("receipt_id_format", f"one of {' | '.join(ID_FORMATS)}, got {fmt!r}")
            fmt = "auto"
        septets = table.get("septets", "unpacked")
        if septets not in SEPTET_LAYOUTS:
            fail("septets", f"one of {' | '.join(SEPTET_LAYOUTS)}, got {septets!r}")
            septets = "unpacked"
        source_addr = text("source_addr", "", 20)
        system_id = text("system_id", None, 15)
        if "system_id" in table and not system_id and isinstance(table["system_id"], str):
            fail("system_id", 'required for kind "smpp"')
        settings = cls(
            name=name,
            host=host,
            port=port or 1,
            system_id=system_id,
            password=text("password", None, 8),
            system_type=text("system_type", "", 12),
            bind=bind,
            source_addr=source_addr,
            source_ton=integer("source_ton", None, 0, 6),
            source_npi=integer("source_npi", None, 0, 18),
            window=integer("window", 10, 1, 1000) or 1,
            rate_per_s=number("rate_per_s", rate_per_s if rate_per_s is not None else 50.0,
                              0.001),
            enquire_link_s=number("enquire_link_s", 30.0, 1.0),
            receipt_id_format=fmt,
            response_timeout_s=number("response_timeout_s", 30.0, 0.1),
            septets=septets,
        )
        if "source_addr" not in table or (isinstance(table["source_addr"], str)
                                          and not source_addr):
            fail("source_addr", 'required for kind "smpp"')
        elif source_addr:
            try:
                settings.source()
            except ValueError as exc:
                fail("source_addr", str(exc))
        if problems:
            raise ConfigError("; ".join(problems))
        return settings
