"""The provider kinds the settings know: their declarations, from the registry.

The kinds are built on these settings (each kind module reads its
:class:`~appliance.config.settings.ProviderSettings`), so the settings cannot import
them when they load: the registry is looked up here, when a table is first read. This
is the one place the settings reach up to the providers, and it reads declarations
only (:class:`~appliance.config.options.DeclaresOptions`): names, options, secrets.
"""

from __future__ import annotations

from collections.abc import Mapping

from .options import DeclaresOptions


def declared_kinds() -> Mapping[str, DeclaresOptions]:
    """Every provider kind by name, as :mod:`appliance.providers.registry` declares it."""
    from appliance.providers.registry import KINDS

    return KINDS
