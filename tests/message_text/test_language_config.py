"""ENC-1: ``national_language`` is a provider setting of the kinds that can send it."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import ConfigError
from appliance.provider_kinds import load_settings
from appliance.smpp.kind import smpp_settings


def test_simulator_and_smpp_take_it_with_the_turkish_prefix_by_default(tmp_path: Path) -> None:
    s = load_settings(_write(tmp_path, '[providers.sim]\nkind = "simulator"\n'
                             'national_language = "turkish"\n'
                             '[providers.smsc]\nkind = "smpp"\nhost = "127.0.0.1"\nport = 2775\n'
                             'system_id = "a"\npassword = "b"\nsource_addr = "ACME"\n'
                             'national_language = "turkish"\n'
                             'national_language_prefixes = ["+90", "+357"]\n'), env={})
    sim, smsc = s.providers["sim"], s.providers["smsc"]
    assert sim.turkish_to("+905321234567") and not sim.turkish_to("+441234567890")
    assert smsc.turkish_prefixes == ("+90", "+357") and smsc.turkish_to("+35799123456")
    smpp_settings(smsc)  # not refused as a foreign setting
    plain = load_settings(_write(tmp_path, '[providers.sim]\nkind = "simulator"\n'), env={})
    assert not plain.providers["sim"].turkish_to("+905321234567")


@pytest.mark.parametrize(("table", "why"), [
    ('kind = "vonage"\nnational_language = "turkish"\n',
     '[providers.p] national_language: kind \'vonage\' cannot send national language tables'),
    ('kind = "simulator"\nnational_language = "greek"\n',
     "[providers.p] national_language: 'greek' is not one of turkish"),
    ('kind = "simulator"\nnational_language = "turkish"\nnational_language_prefixes = ["90"]\n',
     "[providers.p] national_language_prefixes: '90' is not an E.164 prefix"),
])
def test_elsewhere_it_is_a_config_error(tmp_path: Path, table: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_write(tmp_path, "[providers.p]\n" + table), env={})
    assert why in str(err.value)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "appliance.toml"
    path.write_text(text, encoding="utf-8")
    return path
