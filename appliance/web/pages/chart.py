"""The dashboard's chart, drawn on the server as inline SVG (no script, no library).

Messages by hour of creation over the coverage window and the settle time after it:
the total of each hour as a light bar, the part still without a final state drawn
over it. Every hour gets a slot, so a quiet hour shows as a gap rather than
vanishing. The settle time (the live hours, whose reports are still due) sits on a
shaded band so nobody reads its orange as lost reports. Each bar has a ``<title>``
(a tooltip, and text for screen readers). On a narrow screen the chart keeps a
readable size and scrolls sideways (see ``.chart-scroll`` in the stylesheet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup, escape

HOUR_MS = 3_600_000
WIDTH, HEIGHT = 900, 220
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 12, 30


@dataclass(frozen=True)
class HourBar:
    hour_ms: int  # start of the hour, epoch ms UTC
    still_open: int
    total: int


def hour_slots(bars: list[HourBar], start_ms: int, end_ms: int) -> list[HourBar]:
    """One bar per hour from the hour of ``start_ms`` to the hour before ``end_ms``."""
    by_hour = {b.hour_ms: b for b in bars}
    first = start_ms // HOUR_MS
    last = max(first, (end_ms - 1) // HOUR_MS)
    return [by_hour.get(h * HOUR_MS, HourBar(h * HOUR_MS, 0, 0)) for h in range(first, last + 1)]


def _label(hour_ms: int) -> str:
    dt = datetime.fromtimestamp(hour_ms / 1000, tz=UTC)
    return dt.strftime("%d %b %H:00") if dt.hour == 0 else dt.strftime("%H:00")


def _nice_max(value: int) -> int:
    if value <= 4:
        return 4
    step = 10 ** (len(str(value)) - 1)
    for mult in (1, 2, 2.5, 5, 10):
        top = int(mult * step)
        if top >= value:
            return top
    return value


def merge_hours(*groups: list[HourBar]) -> list[HourBar]:
    """Bars of the same hour added up (the hour the settle boundary cuts in two)."""
    out: dict[int, HourBar] = {}
    for bars in groups:
        for b in bars:
            old = out.get(b.hour_ms)
            out[b.hour_ms] = b if old is None else HourBar(
                b.hour_ms, old.still_open + b.still_open, old.total + b.total)
    return sorted(out.values(), key=lambda b: b.hour_ms)


# Half the width of an hour label ("17:00") at the chart's font size, in viewBox units.
LABEL_HALF_W = 20


def _hour_label(center: float, label: str) -> str:
    """An x-axis label centred under its bar, or ending at the chart's right edge when
    centring it would draw its end outside (the last hour's label was cut off)."""
    if center + LABEL_HALF_W > WIDTH:
        return (f'<text x="{WIDTH - 1}" y="{HEIGHT - 10}" text-anchor="end">'
                f"{escape(label)}</text>")
    return (f'<text x="{center:.1f}" y="{HEIGHT - 10}" text-anchor="middle">'
            f"{escape(label)}</text>")


def open_by_hour_svg(bars: list[HourBar], start_ms: int, end_ms: int,
                     settling_from_ms: int | None = None) -> Markup:
    """The chart as SVG markup, safe to place in a template; hours from
    ``settling_from_ms`` on are drawn on the shaded settle band."""
    slots = hour_slots(bars, start_ms, end_ms)
    top = _nice_max(max((b.total for b in slots), default=0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot_w = plot_w / len(slots)
    bar_w = max(1.0, slot_w * 0.8)
    every = max(1, round(len(slots) / 8))
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"'
        ' aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">',
        '<title id="chart-title">Messages by hour of creation: still open vs total</title>',
        f'<desc id="chart-desc">{len(slots)} hours; the tallest hour has'
        f' {max((b.total for b in slots), default=0)} messages.</desc>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - frac)
        out.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}"'
                   f' y2="{y:.1f}" stroke-dasharray="{"0" if frac == 0 else "3 3"}"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{round(top * frac)}</text>')
    if settling_from_ms is not None and settling_from_ms < end_ms:
        first = slots[0].hour_ms
        band_x = LEFT + max(0.0, (settling_from_ms - first) / HOUR_MS) * slot_w
        band_x = min(band_x, WIDTH - RIGHT)
        out.append(f'<rect class="settling" x="{band_x:.1f}" y="{TOP}"'
                   f' width="{WIDTH - RIGHT - band_x:.1f}" height="{plot_h}"/>')
        out.append(f'<text class="band" x="{band_x + 4:.1f}" y="{TOP + 14}">live</text>')
    for i, bar in enumerate(slots):
        x = LEFT + i * slot_w + (slot_w - bar_w) / 2
        h_total = plot_h * bar.total / top
        h_open = plot_h * bar.still_open / top
        label = _label(bar.hour_ms)
        tip = escape(f"{label} UTC: {bar.still_open} still open of {bar.total}")
        out.append(f'<g><title>{tip}</title>')
        out.append(f'<rect class="total" x="{x:.1f}" y="{TOP + plot_h - h_total:.1f}"'
                   f' width="{bar_w:.1f}" height="{h_total:.1f}"/>')
        if bar.still_open:
            out.append(f'<rect class="open" x="{x:.1f}" y="{TOP + plot_h - h_open:.1f}"'
                       f' width="{bar_w:.1f}" height="{h_open:.1f}"/>')
        out.append("</g>")
        if i % every == 0:
            out.append(_hour_label(x + bar_w / 2, label))
    out.append("</svg>")
    return Markup("".join(out))


# The campaign page's bar: every message of the campaign in one of five groups.
STATE_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("waiting", "waiting to be sent", ("QUEUED", "SENDING", "RETRY")),
    ("sent", "sent, report still due", ("SUBMITTED", "ACCEPTED", "ENROUTE", "UNCERTAIN")),
    ("delivered", "delivered", ("DELIVERED",)),
    ("failed", "failed, expired or rejected", ("FAILED", "EXPIRED", "REJECTED")),
    ("unknown", "no report in the window, or cancelled", ("UNKNOWN", "CANCELLED")),
)


def state_groups(counts: dict[str, int], total: int) -> list[tuple[str, str, int]]:
    """(css class, label, messages) per group; messages not created yet count as waiting
    and states no group names go with the last."""
    named = {s for _, _, states in STATE_GROUPS for s in states}
    out = []
    for cls, label, states in STATE_GROUPS:
        n = sum(counts.get(s, 0) for s in states)
        if cls == "waiting":
            n += max(0, total - sum(counts.values()))
        if cls == "unknown":
            n += sum(v for s, v in counts.items() if s not in named)
        out.append((cls, label, n))
    return out


def state_bar_svg(counts: dict[str, int], total: int) -> Markup:
    """A stacked bar of the campaign's messages by group (never blank: messages still
    to send are a segment of their own)."""
    groups = state_groups(counts, total)
    whole = max(1, sum(n for _, _, n in groups))
    width, height = 1000, 24
    out = [f'<svg class="statebar" viewBox="0 0 {width} {height}" preserveAspectRatio="none"'
           ' role="img" aria-label="Messages by state" xmlns="http://www.w3.org/2000/svg">',
           f'<rect class="frame" x="0" y="0" width="{width}" height="{height}"/>']
    x = 0.0
    for cls, label, n in groups:
        if not n:
            continue
        w = width * n / whole
        out.append(f'<rect class="{cls}" x="{x:.2f}" y="0" width="{w:.2f}" height="{height}">'
                   f'<title>{escape(f"{n} {label}")}</title></rect>')
        x += w
    out.append("</svg>")
    return Markup("".join(out))
