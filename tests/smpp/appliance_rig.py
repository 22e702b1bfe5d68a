"""Real processes for ``kind = "smpp"`` through the whole appliance.

The SMSC simulator runs as its own process (``appliance simulator --smpp-port``, with
its HTTP side for the test hooks ``/_sim/smpp/stats``, ``/_sim/smpp/mo`` and
``/_sim/smpp/drop``), and ``appliance serve`` as another, pointed at it by a config
file. The test reads the appliance's SQLite file read-only to compare every part with
what the SMSC says it took and reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import httpx

from appliance.reports.aggregate import message_state
from appliance.smpp.deliver import split_udh
from appliance.smpp.receipt import state_of
from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import SimulatorProcess

PROVIDER = "smsc"
FINAL = ("DELIVERED", "FAILED", "EXPIRED", "REJECTED")


class Smsc(SimulatorProcess):
    """The SMSC simulator (and the HTTP simulator, for its test hooks) in a process."""

    def __init__(self, tmp: Path, *flags: str) -> None:
        self.smpp_port = free_port()
        super().__init__(tmp, "--smpp-port", str(self.smpp_port), *flags)

    def smpp(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(self.url + "/_sim/smpp/stats", timeout=30).json()
        return data

    def drop(self) -> int:
        dropped: int = httpx.post(self.url + "/_sim/smpp/drop", timeout=10).json()["dropped"]
        return dropped

    def mo(self, sender: str, text: str) -> None:
        httpx.post(self.url + "/_sim/smpp/mo", json={"from": sender, "text": text},
                   timeout=10).raise_for_status()


def smpp_config(path: Path, port: int, *, rate_per_s: float = 5000, window: int = 10,
                response_timeout_s: float = 1.0, extra: str = "", top: str = "") -> Path:
    path.write_text(f"""{top}
[sending]
max_attempts = 20

[providers.{PROVIDER}]
kind = "smpp"
host = "127.0.0.1"
port = {port}
system_id = "appliance"
password = "secret"
source_addr = "ACME"
window = {window}
rate_per_s = {rate_per_s}
enquire_link_s = 5
response_timeout_s = {response_timeout_s}
{extra}
""")
    return path


@dataclass
class Rig:
    smsc: Smsc
    server: Server
    key: str
    tmp: Path

    @property
    def data(self) -> Path:
        return self.server.data_dir

    def api(self) -> httpx.Client:
        return self.server.client(self.key)


@contextmanager
def rig(tmp: Path, *flags: str, config_extra: str = "", **config: Any) -> Iterator[Rig]:
    smsc = Smsc(tmp, *flags)
    smsc.start()
    data = tmp / "data"
    cfg = smpp_config(tmp / "appliance.toml", smsc.smpp_port, extra=config_extra, **config)
    server = Server(data, cfg)
    try:
        key = create_account(data)
        server.start()
        yield Rig(smsc, server, key, tmp)
    finally:
        server.stop()
        smsc.stop()


def numbers(count: int, base: int = 5_320_000_000) -> list[str]:
    return [f"+90{base + i}" for i in range(count)]


def campaign(api: httpx.Client, name: str, to: list[str], body: str) -> int:
    job = api.post("/api/contacts/import", json={"list": name, "text": "\n".join(to) + "\n"})
    assert job.status_code == 202, job.text
    wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 60)
    made = api.post("/api/campaigns", json={"list": name, "body": body, "provider": PROVIDER})
    assert made.status_code == 202, made.text
    campaign_id: int = made.json()["campaignId"]
    wait_for(lambda: api.get(f"/api/campaigns/{campaign_id}").json()["created"] == len(to), 60)
    return campaign_id


def query(data: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows from the appliance's database, read-only, while it runs."""
    conn = apsw.Connection(str(data / "appliance.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


@dataclass(frozen=True)
class PartRow:
    ref: str
    msisdn: str
    message_state: str
    part: int
    provider_msg_id: str | None
    state: str


def parts(data: Path) -> list[PartRow]:
    return [PartRow(*r) for r in query(
        data, "SELECT m.ref, m.msisdn, m.state, p.part, p.provider_msg_id, p.state"
              " FROM messages m JOIN message_parts p ON p.message_id = m.id"
              " ORDER BY m.id, p.part")]


def key_of(smsc_id: str) -> str:
    """The appliance's key for one of the simulator's ids (hexadecimal, 8 digits)."""
    return str(int(smsc_id, 16))


@dataclass(frozen=True)
class TakenSegment:
    msisdn: str
    part: int  # from the UDH (1 when there is none)
    smsc_id: str
    final_state: str | None  # ours, from the SMSC's final word; None: it never reports
    times_taken: int


def taken_segments(stats: dict[str, Any]) -> list[TakenSegment]:
    out = []
    for seg, smsc_id in stats["accepted"].items():
        dest, raw = seg.split(":", 1)
        octets = bytes.fromhex(raw)
        esm = 0x40 if octets[:3] == b"\x05\x00\x03" else 0
        _, concat = split_udh(esm, octets)
        word = stats["finals"].get(smsc_id)
        final = None if smsc_id in stats["silent"] or word is None else state_of(word)
        out.append(TakenSegment("+" + dest, 1 if concat is None else concat[2], smsc_id,
                                final, int(stats["taken"][seg])))
    return out


def expected_message_states(segments: list[TakenSegment], parts_of: dict[str, int]
                            ) -> dict[str, str]:
    """Each fully taken message's final state, from what the SMSC will report."""
    by_msisdn: dict[str, dict[int, str]] = {}
    for s in segments:
        if s.final_state is not None:
            by_msisdn.setdefault(s.msisdn, {})[s.part] = s.final_state
    return {m: message_state(states.values()) for m, states in by_msisdn.items()
            if len(states) == parts_of.get(m, 0)}


def metric(server: Server, name: str, **labels: str) -> float:
    """One sample from ``/metrics`` (0 when absent)."""
    text = httpx.get(server.url + "/metrics", timeout=30).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        metric_name, _, rest = series.partition("{")
        if metric_name != name:
            continue
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if got == want:
            return float(value)
    return 0.0
