"""Reading consent records as a client sends them (IYS-2): one JSON object, a JSON array,
or CSV with a header row.

The fields are ``msisdn``, ``status`` (ONAY or RET), ``recipient_type`` (BIREYSEL or
TACIR), ``source`` and ``consented_at``; İYS's own names for them are taken too
(``recipient``, ``recipientType``, ``consentDate``, as its consent records and exports
name them), and a ``type`` column, when present, must be ``MESAJ`` (İYS keeps call and
e-mail consents in the same lists). ``consented_at`` is ISO 8601 with ``Z`` or an offset,
or İYS's ``YYYY-MM-DD HH:MM:SS`` (and a date alone), read as Turkey's time
(Europe/Istanbul); without one, the time the record arrives. A row that cannot be read is
a :class:`Reject` with its line and reason; nothing of it is applied. Pure CPU work.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

from appliance.imports.lines import decode_payload
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.optout.consents import RECIPIENT_TYPES, STATUSES, ConsentRecord

TURKEY: Final = ZoneInfo("Europe/Istanbul")
MAX_ROWS: Final = 100_000
MAX_BYTES: Final = 16 * 1024 * 1024
MAX_SOURCE_CHARS: Final = 100
MAX_REJECTS_SHOWN: Final = 1000
FUTURE_SLACK_MS: Final = 60_000  # clocks apart by up to a minute are not the future
ALIASES: Final = {"msisdn": "msisdn", "recipient": "msisdn", "status": "status",
                  "recipient_type": "recipient_type", "recipienttype": "recipient_type",
                  "source": "source", "consented_at": "consented_at",
                  "consentdate": "consented_at", "type": "type"}
FIELDS: Final = ("msisdn", "status", "recipient_type", "source", "consented_at")


class BadRecord(ValueError):
    """Why a row is not a consent record."""


@dataclass(frozen=True)
class Reject:
    line_number: int
    line: str
    reason: str


@dataclass
class ReadRecords:
    records: list[ConsentRecord] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    rows: int = 0


def _fold(value: str) -> str:
    return value.strip().replace("İ", "I").replace("ı", "i").upper()


def read_time(value: Any, now_ms: int) -> int:
    """``consented_at`` as epoch ms; :class:`BadRecord` when unreadable or in the future."""
    if value is None or value == "":
        return now_ms
    if not isinstance(value, str) or len(value) > 40:
        raise BadRecord("consented_at must be a date and time such as 2024-01-31T10:00:00Z")
    text = value.strip().replace("z", "Z").replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadRecord(f"consented_at is not a date and time: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=TURKEY)
    at = int(parsed.timestamp() * 1000)
    if at > now_ms + FUTURE_SLACK_MS:
        raise BadRecord(f"consented_at is in the future: {value!r}")
    return at


def record_of(fields: Mapping[str, Any], region: str, now_ms: int) -> ConsentRecord:
    """One record from its fields (names as :data:`ALIASES`); :class:`BadRecord`."""
    named: dict[str, Any] = {}
    for key, value in fields.items():
        name = ALIASES.get(str(key).strip().lower())
        if name is None:
            raise BadRecord(f"unknown field {str(key)[:40]!r}")
        named[name] = value
    kind = named.get("type")
    if kind not in (None, "") and (not isinstance(kind, str) or _fold(kind) != "MESAJ"):
        raise BadRecord(f"type {kind!r} is not an SMS consent (MESAJ)")
    raw = named.get("msisdn")
    if not isinstance(raw, str) or not raw.strip() or len(raw) > 64:
        raise BadRecord("msisdn must be a phone number")
    number = normalise_msisdn(raw, region)
    if isinstance(number, Invalid):
        raise BadRecord(f"msisdn is not a phone number: {number.reason}")
    status = named.get("status")
    if not isinstance(status, str) or _fold(status) not in STATUSES:
        raise BadRecord(f"unknown status {status!r} (ONAY or RET)")
    rtype = named.get("recipient_type")
    if not isinstance(rtype, str) or _fold(rtype) not in RECIPIENT_TYPES:
        raise BadRecord(f"unknown recipient_type {rtype!r} (BIREYSEL or TACIR)")
    source = named.get("source")
    if source is None:
        source = ""
    if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS or "\x00" in source:
        raise BadRecord(f"source must be text of at most {MAX_SOURCE_CHARS} characters")
    return ConsentRecord(number.msisdn, _fold(status), _fold(rtype), source.strip(),
                         read_time(named.get("consented_at"), now_ms))


def read_json_array(items: list[Any], region: str, now_ms: int) -> ReadRecords:
    out = ReadRecords(rows=len(items))
    for i, item in enumerate(items, 1):
        try:
            if not isinstance(item, dict):
                raise BadRecord("each item must be an object")
            out.records.append(record_of(item, region, now_ms))
        except BadRecord as exc:
            out.rejects.append(Reject(i, json.dumps(item, ensure_ascii=False)[:200], str(exc)))
    return out


def read_csv(payload: bytes, region: str, now_ms: int) -> ReadRecords:
    """A CSV upload: a header row naming the columns (any order); without one the
    columns are :data:`FIELDS` in that order. ``,`` ``;`` or tab separate the cells."""
    text = decode_payload(payload)
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    delimiter = max((",", ";", "\t"), key=first.count)
    out = ReadRecords()
    header: list[str] | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cells = next(csv.reader(io.StringIO(line), delimiter=delimiter), [])
        folded = [c.strip().lower() for c in cells]
        if header is None and out.rows == 0 and not out.rejects and (
                "msisdn" in folded or "recipient" in folded):
            header = folded
            continue
        out.rows += 1
        names = header or list(FIELDS)
        try:
            if len(cells) > len(names):
                raise BadRecord(f"{len(cells)} cells, more than the {len(names)} columns")
            out.records.append(record_of(dict(zip(names, cells, strict=False)), region,
                                         now_ms))
        except BadRecord as exc:
            out.rejects.append(Reject(number, line[:200], str(exc)))
    return out
