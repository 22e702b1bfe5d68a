"""What a start says about settings that are valid but cannot do the job.

A configuration without any provider is valid (the console, imports and the API work)
but can send nothing: every message and campaign is refused ``422 no_provider``. So
``serve`` logs it once it listens, and ``config check`` prints it, rather than leave
the first send to find out. (Once it listens: a start that fails says one line, why.)
"""

from __future__ import annotations

from appliance.config import Settings

NO_PROVIDER = (
    "no provider is configured: every message and campaign will be refused"
    " (422 no_provider) until one is. Add a [providers.NAME] section to the config file"
    " (see packaging/appliance.toml and docs/providers.md), or try 'appliance demo'.")


def start_warnings(settings: Settings) -> list[str]:
    """The warnings ``settings`` call for at start (none: an empty list)."""
    return [] if settings.providers else [NO_PROVIDER]
