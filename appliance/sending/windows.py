"""A campaign's sending window (OPS-2): the hours of the day, in a time zone, it may send.

``from`` and ``to`` are wall-clock times (``"09:00"``, ``"20:00"``) in an IANA time zone
(``"Europe/Istanbul"``, through :mod:`zoneinfo`). The window is open from ``from``
(inclusive) to ``to`` (exclusive) each local day; ``from > to`` spans midnight
(``22:00``-``06:00``). Whether it is open is read from the local wall clock at that
instant, so daylight saving changes are handled by the time zone database: on the day
the clocks go forward a window opening in the skipped hour opens at the first local
minute after it, and on the day they go back an hour that happens twice is inside the
window both times if its wall time is. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MINUTES_PER_DAY = 24 * 60
_MINUTE_MS = 60_000


class BadWindow(ValueError):
    """A window that cannot be used, with the field it is about."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def parse_hhmm(text: Any, field: str, *, allow_24: bool = False) -> int:
    """``"HH:MM"`` as minutes after midnight; :class:`BadWindow` otherwise."""
    if not isinstance(text, str) or len(text) != 5 or text[2] != ":" \
            or not (text[:2] + text[3:]).isascii() or not (text[:2] + text[3:]).isdigit():
        raise BadWindow(field, f"'window.{field}' must be a time of day as HH:MM")
    hours, minutes = int(text[:2]), int(text[3:])
    if minutes > 59 or hours > 24 or (hours == 24 and (minutes or not allow_24)):
        raise BadWindow(field, f"'window.{field}' is not a time of day: {text!r}")
    return hours * 60 + minutes


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def zone(name: Any) -> ZoneInfo:
    if not isinstance(name, str) or not name or len(name) > 64 or not name.isascii():
        raise BadWindow("tz", "'window.tz' must be an IANA time zone such as Europe/Istanbul")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadWindow("tz", f"'window.tz' is not a time zone we know: {name!r}") from None


@dataclass(frozen=True)
class SendWindow:
    start: int  # minutes after local midnight, inclusive
    end: int  # minutes after local midnight, exclusive (1440: midnight)
    tz: str

    @classmethod
    def parse(cls, value: Any) -> SendWindow:
        """The API's ``{"from", "to", "tz"}``; :class:`BadWindow` for anything else."""
        if not isinstance(value, dict):
            raise BadWindow("window", "'window' must be an object with from, to and tz")
        unknown = set(value) - {"from", "to", "tz"}
        if unknown:
            raise BadWindow("window", f"'window' has unknown fields: {', '.join(sorted(unknown))}")
        start = parse_hhmm(value.get("from"), "from")
        end = parse_hhmm(value.get("to"), "to", allow_24=True)
        if start == end % MINUTES_PER_DAY:
            raise BadWindow("to", "'window.from' and 'window.to' are the same time: the"
                                  " window would be empty (leave 'window' out to send at"
                                  " any hour)")
        zone(value.get("tz"))
        return cls(start, end, str(value["tz"]))

    def as_json(self) -> dict[str, str]:
        return {"from": hhmm(self.start), "to": hhmm(self.end), "tz": self.tz}

    @property
    def zone(self) -> ZoneInfo:
        return zone(self.tz)

    def local_minute(self, at_ms: int) -> float:
        local = datetime.fromtimestamp(at_ms / 1000, tz=UTC).astimezone(self.zone)
        return local.hour * 60 + local.minute + local.second / 60

    def is_open(self, at_ms: int) -> bool:
        m = self.local_minute(at_ms)
        if self.start < self.end:
            return self.start <= m < self.end
        return m >= self.start or m < self.end

    def next_open_ms(self, at_ms: int) -> int:
        """The first instant at or after ``at_ms`` when the window is open."""
        if self.is_open(at_ms):
            return at_ms
        tz = self.zone
        local = datetime.fromtimestamp(at_ms / 1000, tz=UTC).astimezone(tz)
        for days in range(0, 3):
            day = (local + timedelta(days=days)).date()
            wall = datetime(day.year, day.month, day.day, self.start // 60, self.start % 60,
                            tzinfo=tz)  # fold=0: the first of a repeated wall time
            candidate = int(wall.astimezone(UTC).timestamp() * 1000)
            if candidate <= at_ms or not self.is_open(candidate):
                continue
            # A wall time in a skipped hour lands after the jump: the window opened at
            # the jump itself, the first open minute before it.
            while candidate - _MINUTE_MS > at_ms and self.is_open(candidate - _MINUTE_MS):
                candidate -= _MINUTE_MS
            return candidate
        return at_ms  # not reached: a non-empty window opens within two days


def window_of(start: int | None, end: int | None, tz: str | None) -> SendWindow | None:
    """The window stored in a campaign row (None: it may send at any hour)."""
    if start is None or end is None or not tz:
        return None
    return SendWindow(int(start), int(end), str(tz))
