"""The ``campaigns`` loop: turns an accepted campaign into messages, chunk by chunk.

Each step expands the oldest unfinished campaign by one chunk (one write unit: the
messages, each with its personalised text, and the new position together) and wakes
the sender. Paused and scheduled campaigns are expanded too (the sender holds their
messages); a cancelled one is not. Killed anywhere, the
next start carries on from the last committed position.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from appliance.message_text.segments import STANDARD
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.sending.campaign_messages import RoutedTo, expand_chunk, next_to_expand
from appliance.sending.commercial import gated
from appliance.sending.refs import new_ref
from appliance.sending.routes import RouteTable, trickle_ticket

log = logging.getLogger("appliance.campaigns")
LOOP = "campaigns"


class CampaignExpander:
    """The ``campaigns`` loop (``wake`` wakes it); each chunk wakes the sender."""

    def __init__(self, appliance: Runtime, wake_sender: Wake,
                 lowered: Callable[[], Collection[str]] = frozenset) -> None:
        self.appliance = appliance
        self.wake_sender = wake_sender
        self.lowered = lowered  # ROUTE-3: the providers lowered now
        self.created = 0
        self.wake = appliance.scheduler.add(LOOP, self.step, interval_s=1.0)

    async def step(self) -> float | None:
        store = self.appliance.store
        campaign = await store.readers.run(next_to_expand)
        if campaign is None:
            return None
        now = self.appliance.now_ms()
        provider = self.appliance.settings.providers.get(campaign.provider)
        max_parts = provider.max_parts if provider is not None else 0
        prefixes = provider.turkish_prefixes if provider is not None else ()
        counting = provider.counting if provider is not None else STANDARD
        gate = gated(self.appliance.settings, campaign.message_type)
        sender = (provider.sender if provider is not None else "") \
            if self.appliance.settings.compliance.turkey else None
        routing = self._routing(campaign.message_type) if campaign.routed else None
        created = await store.writer.run(
            lambda c: expand_chunk(c, campaign, lambda: new_ref(now), now, max_parts=max_parts,
                                   turkish_prefixes=prefixes, consent_gate=gate,
                                   counting=counting,
                                   sender=sender, routing=routing))
        self.created += created
        self.wake_sender()
        return 0


    def _routing(self, message_type: str | None) -> Callable[[str, str], RoutedTo] | None:
        """Where each message of a routed campaign goes (ROUTE-3): its route's choice
        now, lowered providers after the others but for their trickle (by the ref)."""
        settings = self.appliance.settings
        table = RouteTable(settings)
        if not table:
            return None
        lowered = self.lowered()

        def routed(msisdn: str, ref: str) -> RoutedTo:
            choice = table.choose(msisdn, message_type, None, lowered, trickle_ticket(ref))
            p = settings.providers[choice.provider]
            return RoutedTo(choice.provider, choice.route, p.max_parts, p.counting_to(msisdn))

        return routed


def install(runtime: Runtime, wake_sender: Wake,
            lowered: Callable[[], Collection[str]] = frozenset) -> CampaignExpander:
    """The campaign expansion loop; it wakes the sender (``wake_sender``) after each chunk.
    ``lowered``: the providers lowered now, which routes try after the others."""
    return CampaignExpander(runtime, wake_sender, lowered)
