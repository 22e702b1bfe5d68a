"""docs/inbound.md says what the code does: the keyword table, the defaults, every kind's
inbound format documented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from appliance.config import Settings
from appliance.optout.keywords import DEFAULT_KEYWORDS, Keywords
from appliance.provider_kinds import ADAPTERS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "inbound.md").read_text()
PROVIDERS = (ROOT / "docs" / "providers.md").read_text()


def test_every_row_of_the_keyword_table_is_what_the_matcher_says() -> None:
    rows = re.findall(r"^\| (`.+`) \| (yes|no)\b", DOC, re.M)
    assert len(rows) >= 6
    keywords = Keywords(DEFAULT_KEYWORDS)
    for cells, verdict in rows:
        for text in re.findall(r"`([^`]+)`", cells):
            assert (keywords.match(text) is not None) == (verdict == "yes"), text


def test_the_default_keywords_are_the_documented_and_sampled_ones() -> None:
    assert Settings().optout.keywords == DEFAULT_KEYWORDS
    shown = ", ".join(f'"{k}"' for k in DEFAULT_KEYWORDS)
    assert f"keywords = [{shown}]" in DOC
    sample = tomllib.loads((ROOT / "packaging" / "appliance.toml").read_text())
    assert tuple(sample["optout"]["keywords"]) == DEFAULT_KEYWORDS


def test_every_kind_has_its_inbound_format_documented() -> None:
    section = PROVIDERS.split("## Inbound messages", 1)[1].split("\n## ", 1)[0]
    for kind in ADAPTERS:
        assert f"| `{kind}` |" in section, kind
