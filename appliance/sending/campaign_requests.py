"""What a client asks about campaigns, through the API or the console.

Planning one (the dry run), starting it, steering it (pause, resume, cancel), deciding
about its ``UNCERTAIN`` messages, and reading its progress. Each runs its unit on the
store, wakes the loop that has work from it, and says a refusal as a
:class:`~appliance.refusals.Refused` (the web layer answers it: ``docs/api.md``). The
checks of what was sent are :mod:`appliance.sending.checks`.
"""

from __future__ import annotations

from appliance.key_quotas import KeyQuota, charge_messages
from appliance.refusals import Conflict, Invalid, no_such
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.sending.campaigns import (
    Campaign,
    IdempotencyConflict,
    ListChanged,
    NewCampaign,
    NoSuchCampaign,
    NoSuchList,
    NotAllowed,
    Progress,
    campaign_progress,
    create_campaign,
    create_confirmed_campaign,
    get_campaign,
)
from appliance.sending.commercial import gated
from appliance.sending.dry_run import DryRun, dry_run
from appliance.sending.duplicates import DayKeys
from appliance.sending.resolution import RESEND, resolve_campaign
from appliance.sending.sender import Sender
from appliance.sending.steering import cancel_campaign, pause_campaign, resume_campaign
from appliance.store.connection import Connection

CONTROLS = ("pause", "resume", "cancel")


async def plan_campaign(runtime: Runtime, account_id: int, list_name: str, provider: str,
                        body: str, message_type: str | None = None,
                        send_at: int | None = None) -> DryRun:
    """The dry run: what the campaign would send, after personalisation. Refused:
    ``unknown_list``. Parts are counted with the Turkish tables for the numbers the
    provider sends them to (ENC-1). In Turkey, the messages whose text already went to
    their number on the day they would be due (``send_at`` or now) are left out and
    counted (IYS-4), as the expansion will."""
    settings = runtime.settings.provider(provider)
    day_keys = DayKeys(account_id, settings.sender, max(runtime.now_ms(), send_at or 0)) \
        if runtime.settings.compliance.turkey else None
    try:
        return await runtime.store.readers.run(
            lambda c: dry_run(c, account_id, list_name, provider, body,
                              turkish_prefixes=settings.turkish_prefixes,
                              counting=settings.counting,
                              consent_gate=gated(runtime.settings, message_type),
                              day_keys=day_keys))
    except NoSuchList as exc:
        raise Invalid("unknown_list", str(exc)) from None


async def start_campaign(runtime: Runtime, new: NewCampaign, *, wake_expansion: Wake,
                         through_contact_id: int | None = None,
                         expected_contacts: int | None = None,
                         quota: KeyQuota | None = None) -> tuple[Campaign, bool]:
    """Write the campaign's row and wake its expansion; returns it and whether it is new.

    The campaign is the list up to ``through_contact_id`` (the contacts its dry run
    counted) or, with ``expected_contacts``, the list as a confirmation page stated it.
    The same key gives back the same campaign. Refused: ``idempotency_key_reused``,
    ``unknown_list`` and, with ``expected_contacts``, ``list_changed`` (with the
    ``contacts`` the list holds now), and ``daily_limit`` when its messages would pass
    ``quota``'s (charged whole in the same unit: :mod:`appliance.key_quotas`).
    """
    now = runtime.now_ms()

    def unit(c: Connection) -> tuple[Campaign, bool]:
        if expected_contacts is not None:
            made = create_confirmed_campaign(c, new, now, expected_contacts)
        else:
            made = create_campaign(c, new, now, through_contact_id)
        if made[1]:
            charge_messages(c, quota, made[0].total, now,
                            f"this campaign's {made[0].total} messages")
        return made

    try:
        campaign, created = await runtime.store.writer.run(unit)
    except IdempotencyConflict as exc:
        raise Invalid("idempotency_key_reused", str(exc)) from None
    except NoSuchList as exc:
        raise Invalid("unknown_list", str(exc)) from None
    except ListChanged as exc:
        raise Conflict("list_changed", str(exc), contacts=exc.contacts) from None
    if created:
        wake_expansion()
    return campaign, created


async def control_campaign(runtime: Runtime, sender: Sender, campaign_id: int,
                           account_id: int, verb: str) -> tuple[Campaign, int]:
    """Pause, resume or cancel (one of :data:`CONTROLS`). For a pause or a cancel the
    answer waits until none of the campaign's messages is still being sent: from then
    on nothing more of it is submitted. Returns the campaign and, for a cancel, how
    many messages it cancelled. Refused: ``not_found``, ``invalid_state`` (with the
    ``state`` shown)."""
    now = runtime.now_ms()

    def unit(c: Connection) -> tuple[Campaign, int]:
        if verb == "pause":
            return pause_campaign(c, campaign_id, account_id, now), 0
        if verb == "resume":
            return resume_campaign(c, campaign_id, account_id, now), 0
        return cancel_campaign(c, campaign_id, account_id, now)

    try:
        campaign, count = await runtime.store.writer.run(unit)
    except NoSuchCampaign:
        raise no_such("campaign") from None
    except NotAllowed as exc:
        raise Conflict("invalid_state", f"cannot {verb} this campaign: {exc}",
                       state=exc.state) from None
    if verb == "resume":
        sender.wake()
    else:
        await sender.settle_campaign(campaign.id)
    return campaign, count


async def resolve_all(runtime: Runtime, campaign_id: int, account_id: int, action: str,
                      actor: str, *, wake_sender: Wake) -> int:
    """Decide about every ``UNCERTAIN`` message of a campaign; returns how many.
    Refused: ``not_found``. A resend wakes the sender."""
    now = runtime.now_ms()

    def unit(c: Connection) -> int:
        if get_campaign(c, campaign_id, account_id) is None:
            raise NoSuchCampaign("no such campaign")
        return resolve_campaign(c, campaign_id, action, actor, now)

    try:
        count = await runtime.store.writer.run(unit)
    except NoSuchCampaign:
        raise no_such("campaign") from None
    if count and action == RESEND:
        wake_sender()
    return count


async def read_progress(runtime: Runtime, campaign_id: int,
                        account_id: int) -> Progress | None:
    """The account's campaign with its counts as they are now, or ``None``."""
    now = runtime.now_ms()

    def read(c: Connection) -> Progress | None:
        found = get_campaign(c, campaign_id, account_id)
        return None if found is None else campaign_progress(c, found, now)

    return await runtime.store.readers.run(read)


def campaign_rate(sender: Sender, campaign_id: int) -> float:
    """Messages of the campaign sent per second lately."""
    return sender.campaign_per_s(campaign_id)
