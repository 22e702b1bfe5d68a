"""The ``campaigns`` loop: turns an accepted campaign into messages, chunk by chunk.

Each step expands the oldest unfinished campaign by one chunk (one write unit: the
messages, each with its personalised text, and the new position together) and wakes
the sender. Paused and scheduled campaigns are expanded too (the sender holds their
messages); a cancelled one is not. Killed anywhere, the
next start carries on from the last committed position.
"""

from __future__ import annotations

import logging

from appliance.sending.campaign_messages import expand_chunk, next_to_expand
from appliance.sending.refs import new_ref
from appliance.service import Appliance

log = logging.getLogger("appliance.campaigns")
LOOP = "campaigns"


class CampaignExpander:
    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        self.created = 0

    async def step(self) -> float | None:
        store = self.appliance.store
        campaign = await store.readers.run(next_to_expand)
        if campaign is None:
            return None
        now = self.appliance.now_ms()
        provider = self.appliance.settings.providers.get(campaign.provider)
        max_parts = provider.max_parts if provider is not None else 0
        prefixes = provider.turkish_prefixes if provider is not None else ()
        created = await store.writer.run(
            lambda c: expand_chunk(c, campaign, lambda: new_ref(now), now, max_parts=max_parts,
                                   turkish_prefixes=prefixes))
        self.created += created
        self.appliance.scheduler.wake("sender")
        return 0
