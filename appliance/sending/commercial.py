"""Commercial or transactional (IYS-1, IYS-3): the checks a send or a campaign passes
when ``[compliance] country = "TR"``, before anything is written.

* ``type`` is required there (``422 type_required``); elsewhere it is optional and kept.
* A commercial text must say how to refuse and who sends it (Law 6563 art. 6, its
  regulation's content rules): ``[compliance] optout_pattern`` and ``identity_pattern``
  must both match the body as written (a campaign's template), else ``422
  commercial_content`` with what is ``missing`` (``optout``, ``identity``).
* A commercial campaign without a window of its own sends only in ``commercial_window``
  (daytime in Europe/Istanbul by default).
"""

from __future__ import annotations

import re
from typing import Any, Final

from appliance.config import Settings
from appliance.refusals import Invalid
from appliance.sending.windows import SendWindow

COMMERCIAL, TRANSACTIONAL = "commercial", "transactional"
TYPES: Final = (COMMERCIAL, TRANSACTIONAL)


def check_type(settings: Settings, value: Any) -> str | None:
    """The message type as stated; required with ``country = "TR"``."""
    if value is None:
        if settings.compliance.turkey:
            raise Invalid("type_required", "say whether this is \"commercial\" or"
                          " \"transactional\" as 'type' ([compliance] country = \"TR\")")
        return None
    if value not in TYPES:
        raise Invalid("invalid_type", "'type' must be \"commercial\" or \"transactional\"")
    return str(value)


def check_content(settings: Settings, message_type: str | None, body: str) -> None:
    """A commercial body must match both patterns (with ``country = "TR"``)."""
    c = settings.compliance
    if message_type != COMMERCIAL or not c.turkey:
        return
    missing = [name for name, pattern in (("optout", c.optout_pattern),
                                          ("identity", c.identity_pattern))
               if not re.search(pattern, body)]
    if missing:
        raise Invalid("commercial_content", "a commercial text must say how to refuse"
                      " (optout_pattern) and who sends it (identity_pattern); it lacks "
                      + " and ".join(missing), missing=missing)


def default_window(settings: Settings, message_type: str | None,
                   window: SendWindow | None) -> SendWindow | None:
    """A commercial campaign's window: its own, else ``commercial_window`` (TR)."""
    if window is not None or message_type != COMMERCIAL or not settings.compliance.turkey:
        return window
    return SendWindow.parse(dict(settings.compliance.commercial_window))


def gated(settings: Settings, message_type: str | None) -> bool:
    """Does consent decide who gets it (a commercial message in Turkey)?"""
    return message_type == COMMERCIAL and settings.compliance.turkey
