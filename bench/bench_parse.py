"""Throughput of number normalisation on a realistic 100k-line paste.

Prints the rate (numbers per CPU-second, median of 5 interleaved runs) of:

* baseline: ``phonenumbers.parse`` + ``is_valid_number`` + E.164 formatting, as a
  naive importer would do it;
* ``normalise_msisdn``: what the import worker calls (fast path, with the full
  path only for numbers that are not valid);
* ``_normalise_full``: the same rules with phonenumbers doing every reading;
* ``parse_line`` + ``normalise_msisdn``: the whole per-line parsing cost.

The corpus is mostly Turkish mobiles written the ways people write them, some
foreign numbers, and about 5% junk. Run: ``.venv/bin/python bench/bench_parse.py``.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

import phonenumbers

from appliance.imports.lines import Entry, parse_line
from appliance.imports.normalise import _normalise_full, normalise_msisdn

REGION = "TR"
SIZE = 100_000
RUNS = 5

_TR_MOBILE_PREFIXES = [f"5{n:02d}" for n in (5, 6, 7, 30, 31, 32, 33, 35, 36, 37, 38, 39, 41, 42)]
_FOREIGN = [
    "+44 7911 123456",
    "+49 1512 3456789",
    "+1 212 555 0123",
    "+33 6 12 34 56 78",
    "0049 1512 3456789",
    "+31 6 12345678",
    "+7 912 345 67 89",
]
_JUNK = [
    "abc",
    "0532 123 45 67 ext 12",
    "*100#",
    '=HYPERLINK("x")',
    "0532 123",
    "5",
    "+90 532 123 45 67 89",
    "053212345678901",
    "0532-ABC-4567",
    "Ayşe",
    "++90 532 1234567",
    "０５３２ １２３ ４５ ６７",
    "0212 000 00 00",
]


def _tr_mobile(rng: random.Random) -> str:
    prefix = rng.choice(_TR_MOBILE_PREFIXES)
    rest = f"{rng.randrange(10_000_000):07d}"
    d = prefix + rest
    shape = rng.randrange(8)
    if shape == 0:
        return f"0{d[:3]} {d[3:6]} {d[6:8]} {d[8:]}"
    if shape == 1:
        return f"+90 {d[:3]} {d[3:6]} {d[6:]}"
    if shape == 2:
        return f"0090{d}"
    if shape == 3:
        return f"90{d}"
    if shape == 4:
        return d
    if shape == 5:
        return f"0{d}"
    if shape == 6:
        return f"+90{d}"
    return f"(0{d[:3]}) {d[3:6]}-{d[6:8]}-{d[8:]}"


def corpus(size: int = SIZE, seed: int = 20240601) -> list[str]:
    """Cells as they would come out of the line parser."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(size):
        roll = rng.random()
        if roll < 0.05:
            out.append(rng.choice(_JUNK))
        elif roll < 0.08:
            out.append(rng.choice(_FOREIGN))
        else:
            out.append(_tr_mobile(rng))
    return out


def lines_of(cells: list[str], seed: int = 99) -> list[str]:
    """The same cells as pasted lines: some with a name, some quoted CSV."""
    rng = random.Random(seed)
    out: list[str] = []
    for cell in cells:
        roll = rng.random()
        if roll < 0.5:
            out.append(cell)
        elif roll < 0.8:
            out.append(f"{cell},Ayşe Yılmaz")
        elif roll < 0.9:
            out.append(f"{cell};Mehmet Öz")
        else:
            out.append(f'"{cell}","Yılmaz, Ayşe"')
    return out


def _baseline(cell: str) -> object:
    try:
        num = phonenumbers.parse(cell, REGION)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(num):
        return None
    return phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.E164)


def _ours(cell: str) -> object:
    return normalise_msisdn(cell, REGION)


def _full(cell: str) -> object:
    return _normalise_full(cell, REGION)


def _line(text: str) -> object:
    entry = parse_line(text)
    if isinstance(entry, Entry):
        return normalise_msisdn(entry.number_text, REGION)
    return entry


def _one_pass(fn: Callable[[str], object], items: list[str]) -> float:
    started = time.process_time()
    for item in items:
        fn(item)
    return len(items) / (time.process_time() - started)


def rates(
    fns: dict[str, tuple[Callable[[str], object], list[str]]], runs: int = RUNS
) -> dict[str, float]:
    """Median items per CPU-second of each function over ``runs`` interleaved passes.

    CPU time rather than wall time, and interleaved passes, so that other load on
    the machine skews neither the rates nor their ratios much.
    """
    for fn, items in fns.values():
        for item in items[:2000]:
            fn(item)
    samples: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(runs):
        for label, (fn, items) in fns.items():
            samples[label].append(_one_pass(fn, items))
    return {label: statistics.median(values) for label, values in samples.items()}


def main() -> None:
    cells = corpus()
    lines = lines_of(cells)
    valid = sum(1 for c in cells if not hasattr(normalise_msisdn(c, REGION), "reason"))
    print(f"corpus: {len(cells)} cells, {valid} valid for {REGION}, median of {RUNS} runs")
    got = rates(
        {
            "baseline": (_baseline, cells),
            "fast": (_ours, cells),
            "full": (_full, cells),
            "line": (_line, lines),
        }
    )
    base, ours, full = got["baseline"], got["fast"], got["full"]
    print(f"  phonenumbers parse+is_valid (baseline) {base:>10,.0f} /s")
    print(f"  normalise_msisdn (fast path)           {ours:>10,.0f} /s")
    print(f"  _normalise_full (full path)            {full:>10,.0f} /s")
    print(f"  parse_line + normalise_msisdn          {got['line']:>10,.0f} /s")
    print(f"  fast / baseline {ours / base:.1f}x, fast / full {ours / full:.1f}x")


if __name__ == "__main__":
    main()
