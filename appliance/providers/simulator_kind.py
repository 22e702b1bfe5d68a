"""The built-in provider simulator (``kind = "simulator"``): Vonage's wire format.

``appliance demo`` and ``appliance simulator`` run a local fake of the Vonage SMS API,
so this kind is the Vonage adapter with local defaults filled in wherever the provider
table leaves a setting empty: the simulator's address, demo credentials, and a shared
signature secret, so delivery receipts are signed (and checked) out of the box exactly
as a real signed Vonage account would sign them.

The webhook timestamp skew check is off by default (``max_skew_s = 0``): the simulator
may run against a test clock moved by hours, and a local demo has nothing to replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import ClassVar

from appliance.config import ProviderSettings

from .base import OutgoingMessage
from .http_kind import http_kind
from .vonage import VonageAdapter, VonageInbound

SIMULATOR_BASE_URL = "http://127.0.0.1:9090"
SIMULATOR_API_KEY = "simulator"
SIMULATOR_API_SECRET = "simulator-api-secret"
SIMULATOR_SIGNATURE_SECRET = "simulator-signature-secret"


def with_simulator_defaults(settings: ProviderSettings) -> ProviderSettings:
    """``settings`` with the simulator's defaults in place of empty values."""
    return replace(
        settings,
        base_url=settings.base_url or SIMULATOR_BASE_URL,
        options={
            **settings.options,
            "api_key": settings.option("api_key") or SIMULATOR_API_KEY,
            "api_secret": settings.option("api_secret") or SIMULATOR_API_SECRET,
            "signature_secret": settings.option("signature_secret")
            or SIMULATOR_SIGNATURE_SECRET,
        },
    )


class SimulatorAdapter(VonageAdapter):
    """The Vonage adapter, pointed at the local simulator, signing on by default."""

    kind = "simulator"
    CALLBACK_MAX_CHARS: ClassVar[int | None] = None  # Vonage's limit, not the simulator's

    def __init__(
        self, settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None,
        tolerated: Iterable[str] = (),
    ) -> None:
        super().__init__(with_simulator_defaults(settings), now_ms=now_ms, tolerated=tolerated)

    def encoding_params(self, msg: OutgoingMessage) -> dict[str, str]:
        """A GSM-7 Turkish message (ENC-1) goes as text with ``national-language``, so
        the simulator splits it into the parts the appliance counted."""
        if msg.encoding == "GSM-7 Turkish":
            return {"type": "text", "national-language": "turkish"}
        return {}


# It splits a text in the Turkish tables as an SMSC does (encoding_params).
KIND = http_kind(SimulatorAdapter, VonageInbound, national_language=True)
