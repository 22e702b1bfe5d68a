"""Generated contact lists whose exact import outcome is known by construction.

The expected counts are computed from how each line was made, not by running our
parser, so a test that compares them with a job report can really fail.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

TR_PREFIXES = list(range(530, 560))

BAD_LINES = [
    "hello world",
    "12345",
    "+90 532 123 45 67 89 12 34",
    "0532 123 45 67 ext 12",
    '=HYPERLINK("http://evil.example","click")',
    "+90 532 ABC 4567",
    "++905321234567",
    "0532 123 45 6x",
    "@SUM(1+1)",
    "0532 123 45 67 #9",
]


def e164(prefix: int, sub: int) -> str:
    return f"+90{prefix}{sub:07d}"


def formats(msisdn: str, rng: random.Random) -> str:
    """One of the shapes people paste for the same TR mobile number."""
    national = msisdn[3:]  # 10 digits, e.g. 5321234567
    a, b, c, d = national[:3], national[3:6], national[6:8], national[8:]
    shapes = [
        f"+90 {a} {b} {c}{d}",
        f"0{a} {b} {c} {d}",
        f"0090{national}",
        f"90{national}",
        f"+90 ({a}) {b}-{c}-{d}",
        f"0{national}",
        msisdn,
        f"{national}",
    ]
    return rng.choice(shapes)


@dataclass
class Corpus:
    lines: list[str] = field(default_factory=list)
    distinct: set[str] = field(default_factory=set)
    inserted: int = 0
    duplicates_in_paste: int = 0
    duplicates_in_list: int = 0
    rejected_lines: list[int] = field(default_factory=list)
    blank: int = 0
    header: int = 0

    def text(self, newline: str = "\n") -> str:
        return newline.join(self.lines) + newline

    @property
    def total(self) -> int:
        return len(self.lines)


def make_numbers(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add(e164(rng.choice(TR_PREFIXES), rng.randrange(10_000_000)))
    return sorted(out)


def make_corpus(n_lines: int, seed: int = 7, existing: list[str] | None = None,
                header: bool = True, bare_share: float = 0.6) -> Corpus:
    """``n_lines`` lines: ~85% new numbers, ~7% repeats, ~2% numbers already in the
    list (``existing``), ~3% bad lines, ~3% blank lines, in several formats."""
    rng = random.Random(seed)
    existing_set = set(existing or [])
    c = Corpus()
    if header:
        c.lines.append(rng.choice(["phone,name", "msisdn;name", "Number\tName", "telefon,ad"]))
        c.header = 1
    seen: list[str] = []
    seen_set: set[str] = set()
    while len(c.lines) < n_lines:
        r = rng.random()
        if r < 0.03:
            c.lines.append(rng.choice(["", "   ", "\t"]))
            c.blank += 1
            continue
        if r < 0.06:
            c.lines.append(rng.choice(BAD_LINES))
            c.rejected_lines.append(len(c.lines))
            continue
        if r < 0.13 and seen:
            number = rng.choice(seen)
            c.duplicates_in_paste += 1
        elif r < 0.15 and existing:
            # Already in the list before this import: every occurrence counts as such.
            number = rng.choice(existing)
            c.duplicates_in_list += 1
        else:
            while True:
                number = e164(rng.choice(TR_PREFIXES), rng.randrange(10_000_000))
                if number not in seen_set and number not in existing_set:
                    break
            seen.append(number)
            seen_set.add(number)
            c.inserted += 1
        cell = formats(number, rng)
        shape = rng.random()
        if shape < bare_share:
            line = cell
        elif shape < 0.75 or bare_share < 0.6:
            line = f"{cell},Ayşe Yılmaz"
        elif shape < 0.85:
            line = f"{cell};Mehmet"
        elif shape < 0.95:
            line = f"{cell}\tZeynep"
        else:
            line = f'"{cell}","Öztürk, Ali"'
        c.lines.append(line)
        c.distinct.add(number)
    return c
