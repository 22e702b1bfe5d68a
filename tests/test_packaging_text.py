"""The sample configuration says what this version does with ``database_url``."""

from __future__ import annotations

from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "packaging" / "appliance.toml"


def test_the_sample_config_says_postgresql_is_served() -> None:
    text = " ".join(line.lstrip("# ").strip() for line in SAMPLE.read_text().splitlines())
    assert "serves from SQLite only" not in text
    assert "is served from that PostgreSQL database" in text
    assert "several appliance serve processes may share it" in text
