"""ENC-1: parts of 1,000 Turkish campaign texts with the Turkish tables, against UCS-2.

Prints, for the seeded corpus of :mod:`bench.turkish_corpus`:

* parts: the total with both Turkish tables (as SMPP and the simulator send), with the
  single shift alone and with the locking shift alone (as a kind that can signal only
  one sends), and as each aggregator kind sends and counts them (its declared
  ``Counting``: Verimor, Netgsm), against UCS-2's total for the same texts, as a ratio
  (goal <= 0.55, with both tables);
* encoding cost per message, median of 5 interleaved runs: today's encoder without the
  tables and with them (``segment(text, turkish=True)``), and the SMPP octets of every
  part with them, beside the encoder as it was before ENC-1 (the module at
  :data:`BEFORE`, read from git; without git, today's choice without the tables).

Run: ``.venv/bin/python bench/bench_turkish.py``.
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from appliance.message_text import segments as now  # noqa: E402
from appliance.message_text.alphabets import TURKISH_LOCKING, TURKISH_SINGLE, Tables  # noqa: E402
from appliance.providers.netgsm_codes import COUNTING as NETGSM  # noqa: E402
from appliance.providers.verimor_codes import COUNTING as VERIMOR  # noqa: E402
from appliance.smpp.encoding import encode_parts  # noqa: E402
from bench.turkish_corpus import corpus  # noqa: E402

BEFORE = "8b671fc"  # the last commit with appliance/sending/segments.py as it was
RUNS = 5


def before() -> tuple[Callable[[str], Any], str]:
    """The encoder before ENC-1, or today's without the tables when git cannot show it."""
    try:
        source = subprocess.run(["git", "show", f"{BEFORE}:appliance/sending/segments.py"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return (lambda text: now.segment(text)), "today's choice without the tables"
    path = Path(tempfile.mkdtemp()) / "segments_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("segments_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.segment, f"the encoder at {BEFORE}"


def parts_with_only(text: str, tables: Tables) -> int:
    """Parts with one pairing (plain GSM-7 where it has every character), else UCS-2."""
    seg = now.segment(text, turkish=True)
    if seg.encoding == "UCS-2":
        return seg.count
    plain = now.segment(text)
    if plain.encoding == "GSM-7":
        return plain.count
    costs = [tables.cost(ch) for ch in text]
    if 0 in costs:
        return plain.count
    single, concat = now.septets_per_part(tables, False), now.septets_per_part(tables, True)
    if sum(costs) <= single:
        return 1
    n, used = 1, 0
    for c in costs:
        if used + c > concat:
            n, used = n + 1, 0
        used += c
    return min(n, plain.count)


def per_message_us(fn: Callable[[str], object], texts: list[str]) -> float:
    start = time.process_time()
    for text in texts:
        fn(text)
    return (time.process_time() - start) / len(texts) * 1e6


def main() -> None:
    texts = corpus()
    segs = [now.segment(t, turkish=True) for t in texts]
    ucs2 = sum(s.ucs2_parts for s in segs)
    both = sum(s.count for s in segs)
    single = sum(parts_with_only(t, TURKISH_SINGLE) for t in texts)
    locking = sum(parts_with_only(t, TURKISH_LOCKING) for t in texts)
    still = sum(1 for s in segs if s.encoding == "UCS-2")
    print(f"corpus: {len(texts)} texts, {min(map(len, texts))}-{max(map(len, texts))}"
          f" characters, {still} still UCS-2 (a character in no Turkish table)")
    print(f"parts, UCS-2 (baseline):            {ucs2}")
    print(f"parts, Turkish tables (both):       {both}  ({both / ucs2:.3f}x, goal <= 0.55x)")
    print(f"parts, single shift alone:          {single}  ({single / ucs2:.3f}x)")
    print(f"parts, locking shift alone:         {locking}  ({locking / ucs2:.3f}x)")
    for name, counting in (("verimor", VERIMOR), ("netgsm", NETGSM)):
        kind = [now.segment(t, counting) for t in texts]
        n = sum(s.count for s in kind)
        still_kind = sum(1 for s in kind if s.encoding == "UCS-2")
        print(f"parts, as {name} sends and counts:  {n}  ({n / ucs2:.3f}x,"
              f" {still_kind} still UCS-2)")

    old, what = before()

    def choose(text: str) -> object:
        return now.segment(text, turkish=True)

    def smpp(text: str) -> object:
        seg = now.segment(text, turkish=True)
        return encode_parts(seg.parts, seg.encoding, 1, seg.tables)

    def plain(text: str) -> object:
        return now.segment(text)

    def verimor(text: str) -> object:
        return now.segment(text, VERIMOR)

    runs: dict[str, list[float]] = {"before": [], "plain": [], "turkish": [], "smpp": [],
                                    "verimor": []}
    for _ in range(RUNS):
        runs["before"].append(per_message_us(old, texts))
        runs["plain"].append(per_message_us(plain, texts))
        runs["turkish"].append(per_message_us(choose, texts))
        runs["smpp"].append(per_message_us(smpp, texts))
        runs["verimor"].append(per_message_us(verimor, texts))
    base = statistics.median(runs["before"])
    print(f"encoding cost per message, baseline ({what}): {base:.1f} us")
    for key, label in (("plain", "today's encoder, a provider without the tables"),
                       ("turkish", "choice among the Turkish tables"),
                       ("smpp", "the same and the SMPP octets of every part"),
                       ("verimor", "as Verimor counts (its one table)")):
        value = statistics.median(runs[key])
        print(f"encoding cost per message, {label}: {value:.1f} us ({value / base:.2f}x)")


if __name__ == "__main__":
    main()
