"""``/api/campaigns``: start a campaign (or dry-run it), show it, steer it, resolve it.

A campaign is accepted as one row and expanded into messages by the ``campaigns``
loop, so the answer does not wait for the list. The checks and the use cases are the
domain's (:mod:`appliance.sending.checks`, :mod:`appliance.sending.campaign_requests`),
shared with the console; their refusals become the JSON errors of ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.disk import below_reserve
from appliance.provider_kinds import validity_range_s
from appliance.sending import resolution
from appliance.sending.campaign_requests import (
    CONTROLS,
    campaign_rate,
    control_campaign,
    plan_campaign,
    read_progress,
    resolve_all,
    start_campaign,
)
from appliance.sending.campaigns import NewCampaign, list_campaigns
from appliance.sending.checks import (
    check_action,
    check_body,
    check_list,
    check_longest,
    check_provider,
    check_send_at,
    check_template,
    check_window,
)
from appliance.sending.commercial import check_content, check_type, default_window
from appliance.sending.refs import new_ref
from appliance.sending.validity import check_validity
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, not_found, path_id, storage_full
from appliance.web.parts import Parts, parts_of
from appliance.web.request_reading import idempotency_key, json_object, request_actor
from appliance.web.sending_json import campaign_accepted_json, campaign_json, dry_run_json

MAX_REQUEST_BYTES = 64 * 1024



async def create_campaign(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    settings = appliance.settings
    data = await json_object(request, MAX_REQUEST_BYTES)
    key = idempotency_key(request)
    list_name = check_list(data.get("list"))
    dry = data.get("dry_run", False)
    if not isinstance(dry, bool):
        raise ApiError(422, "invalid_dry_run", "'dry_run' must be true or false")
    if not dry:  # a dry run creates nothing: not counted against the key's rate
        parts_of(request).key_rates.take(account.quota)
    # ROUTE-3: without a provider named, each message follows [[routes]] (when there are
    # some); the default provider is the one its checks and its dry run go by.
    routed = bool(settings.routes) and data.get("provider") is None
    provider = check_provider(settings, data.get("provider"))
    body = check_body(settings, data.get("body"), provider)
    check_template(body)
    now = appliance.now_ms()
    send_at = check_send_at(data.get("send_at"))
    message_type = check_type(settings, data.get("type"))
    validity_s = check_validity(data.get("validity_s"), settings.sending.validity_s, provider,
                                validity_range_s(settings, provider))
    check_content(settings, message_type, body)
    window = default_window(settings, message_type, check_window(data.get("window")))
    plan = await plan_campaign(appliance, account.id, list_name, provider, body,
                               message_type, send_at)
    if dry:
        return JSONResponse(dry_run_json(plan))
    check_longest(settings, plan, provider)
    new = NewCampaign(
        account_id=account.id,
        list_name=list_name,
        provider=provider,
        body=body,
        idempotency_key=key if key is not None else "auto:" + new_ref(now),
        send_at=send_at,
        window=window,
        planned_parts=plan.parts,
        message_type=message_type,
        validity_s=validity_s,
        routed=routed,
    )
    reserve = below_reserve(settings)
    if reserve is not None:
        raise storage_full(reserve)
    campaign, _ = await start_campaign(appliance, new, through_contact_id=plan.last_contact_id,
                                       wake_expansion=parts_of(request).campaigns.wake,
                                       quota=account.quota)
    return JSONResponse(campaign_accepted_json(campaign, plan, now), status_code=202)


def _campaign_id(request: Request) -> int:
    return path_id(request.path_params["campaign_id"], "campaign")


async def _shown(parts: Parts, campaign_id: int, account_id: int) -> dict[str, Any]:
    progress = await read_progress(parts.runtime, campaign_id, account_id)
    if progress is None:
        raise not_found("campaign")
    return campaign_json(progress, campaign_rate(parts.sender, campaign_id))


async def show_campaign(request: Request) -> Response:
    account = await require_account(request)
    return JSONResponse(await _shown(parts_of(request), _campaign_id(request), account.id))


async def campaigns(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    now = appliance.now_ms()
    found = await appliance.store.readers.run(
        lambda c: list_campaigns(c, account.id, now_ms=now))
    sender = parts_of(request).sender
    return JSONResponse({"campaigns": [campaign_json(p, campaign_rate(sender, p.campaign.id))
                                       for p in found]})


def _control(verb: str) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        account = await require_account(request)
        appliance = parts_of(request).runtime
        campaign_id = _campaign_id(request)
        _, count = await control_campaign(appliance, parts_of(request).sender, campaign_id,
                                          account.id, verb)
        out = await _shown(parts_of(request), campaign_id, account.id)
        if verb == "cancel":
            out["cancelled_now"] = count
        return JSONResponse(out)

    handler.__name__ = f"{verb}_campaign"
    return handler


async def resolve_campaign(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    campaign_id = _campaign_id(request)
    data = await json_object(request, MAX_REQUEST_BYTES)
    action = check_action(data.get("action"))
    count = await resolve_all(appliance, campaign_id, account.id, action,
                              request_actor(request), wake_sender=parts_of(request).sender.wake)
    out = await _shown(parts_of(request), campaign_id, account.id)
    out["resolved"] = count
    if action == resolution.RESEND:
        out["warning"] = resolution.RESEND_WARNING
    return JSONResponse(out)


def routes() -> list[BaseRoute]:
    return [
        Route("/api/campaigns", create_campaign, methods=["POST"]),
        Route("/api/campaigns", campaigns, methods=["GET"]),
        Route("/api/campaigns/{campaign_id}", show_campaign, methods=["GET"]),
        *(Route(f"/api/campaigns/{{campaign_id}}/{verb}", _control(verb), methods=["POST"])
          for verb in CONTROLS),
        Route("/api/campaigns/{campaign_id}/resolve", resolve_campaign, methods=["POST"]),
    ]
