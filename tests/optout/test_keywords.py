"""STOP keywords: case, accents and the Turkish dotted/dotless i; what counts as a STOP."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import ConfigError
from appliance.message_text.words import keyword_problem
from appliance.optout.keywords import DEFAULT_KEYWORDS, Keywords
from appliance.provider_kinds import load_settings

DEFAULT = Keywords(DEFAULT_KEYWORDS)


@pytest.mark.parametrize(("text", "keyword"), [
    ("STOP", "STOP"), ("stop", "STOP"), ("Stop", "STOP"), ("  stop \n", "STOP"),
    ("STOP.", "STOP"), ("Stop!", "STOP"), ('"STOP"', "STOP"), ("ＳＴＯＰ", "STOP"),
    ("stop 🙏", "STOP"), ("STOP ALL", "STOP"),
    ("İPTAL", "IPTAL"), ("IPTAL", "IPTAL"), ("iptal", "IPTAL"), ("İptal", "IPTAL"),
    ("ıptal", "IPTAL"), ("IPTAL.", "IPTAL"), ("İPTAL'e", "IPTAL"), ("ıPTAL", "IPTAL"),
    ("DUR", "DUR"), ("dur", "DUR"), ("Dur.", "DUR"), ("dür", "DUR"), ("DÜR", "DUR"),
    ("RET", "RET"), ("ret", "RET"), ("RET ACME", "RET"), ("ACME RET", "RET"),
    ("Ret, acme", "RET"), ("RET\nACME", "RET"), ("ret 4609", "RET"),
])
def test_a_keyword_in_any_case_or_accent_is_a_stop(text: str, keyword: str) -> None:
    assert DEFAULT.match(text) == keyword


@pytest.mark.parametrize("text", [
    "", "   ", "...", "STOPPED", "durum", "RETURN", "iptaller", "Dur bir dakika",
    "please stop sending these", "RET ACME BANK", "merhaba", "ST OP", "S.T.O.P",
    "Stopping", "1234",
])
def test_anything_else_is_no_stop(text: str) -> None:
    assert DEFAULT.match(text) is None


def test_configured_keywords_are_folded_the_same_way() -> None:
    kw = Keywords(["UNSUBSCRIBE", "İptal", "désabonner"])
    assert kw.match("unsubscribe") == "UNSUBSCRIBE"
    assert kw.match("IPTAL") == "İPTAL"
    assert kw.match("DESABONNER!") == "DÉSABONNER"
    assert kw.match("STOP") is None


@pytest.mark.parametrize(("word", "ok"), [
    ("STOP", True), ("İPTAL", True), ("ret", True), ("STOP ALL", False), ("STOP!", False),
    ("", False), ("!!", False),
])
def test_a_keyword_is_one_word(word: str, ok: bool) -> None:
    assert (keyword_problem(word) is None) == ok


def test_keywords_come_from_the_config_or_the_environment(tmp_path: Path) -> None:
    assert load_settings(env={}).optout.keywords == DEFAULT_KEYWORDS
    cfg = tmp_path / "a.toml"
    cfg.write_text('[optout]\nkeywords = ["STOP", "UNSUBSCRIBE"]\n')
    assert load_settings(cfg, env={}).optout.keywords == ("STOP", "UNSUBSCRIBE")
    env = {"APPLIANCE_OPTOUT_KEYWORDS": "STOP, İPTAL"}
    assert load_settings(env=env).optout.keywords == ("STOP", "İPTAL")
    cfg.write_text("[optout]\nkeywords = []\n")
    assert load_settings(cfg, env={}).optout.keywords == ()


@pytest.mark.parametrize(("text", "fragment"), [
    ('[optout]\nkeywords = ["STOP ALL"]\n', "'STOP ALL' must be one word"),
    ('[optout]\nkeywords = "STOP"\n', None),
    ("[optout]\nkeywords = [1]\n", "keywords: expected a list of strings"),
    ('[optout]\nwords = ["STOP"]\n', "[optout] words: unknown setting"),
])
def test_bad_keywords_are_one_clear_line(tmp_path: Path, text: str, fragment: str | None
                                         ) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text(text)
    if fragment is None:  # a single string is read as a comma-separated list
        assert load_settings(cfg, env={}).optout.keywords == ("STOP",)
        return
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, env={})
    assert fragment in str(err.value)
