"""Steering from the console (OPS-2, OPS-6): pause, resume, cancel a campaign, and decide
about ``UNCERTAIN`` messages.

Each campaign action is asked first, on a page that states what it will do with the
counts as they are now ("Cancelling makes the 12,345 messages not yet sent CANCELLED;
they will never be sent"). The actions are the API's own use cases
(:mod:`appliance.sending.campaign_requests`, :mod:`appliance.sending.message_requests`),
so a pause or a cancel answers only once nothing more of the campaign can be submitted.
A resend always says that the provider may already have the message. Who decided is
kept in the message's history.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.refusals import Refused
from appliance.sending import resolution
from appliance.sending.campaign_requests import (
    CONTROLS,
    campaign_rate,
    control_campaign,
    read_progress,
    resolve_all,
)
from appliance.sending.message_requests import resolve_one
from appliance.sending.refs import looks_like_ref
from appliance.web.errors import refusal_status
from appliance.web.pages.guard import console_page, refusal
from appliance.web.pages.render import page
from appliance.web.parts import parts_of
from appliance.web.sending_json import campaign_json

MAX_ID = 2**62
VERBS = (*CONTROLS, "resend", "mark_failed")


def console_actor(session: ConsoleSession) -> str:
    return f"console user {session.user.name}"


async def _campaign(request: Request, session: ConsoleSession) -> dict[str, object] | None:
    campaign_id: int = request.path_params["campaign_id"]
    if campaign_id > MAX_ID:
        return None
    appliance = parts_of(request).runtime
    progress = await read_progress(appliance, campaign_id, session.account_id)
    if progress is None:
        return None
    return campaign_json(progress, campaign_rate(parts_of(request).sender, campaign_id))


async def confirm(request: Request, session: ConsoleSession, form: FormData) -> Response:
    verb = request.path_params["verb"]
    data = await _campaign(request, session)
    if verb not in VERBS or data is None:
        return refusal(request, session, 404, "not_found", "There is no such campaign.")
    return page(request, "campaign_control.html", session, title=f"Campaign {data['id']}",
                campaign=data, verb=verb, warning=resolution.RESEND_WARNING)


async def act(request: Request, session: ConsoleSession, form: FormData) -> Response:
    verb = request.path_params["verb"]
    campaign_id: int = request.path_params["campaign_id"]
    appliance = parts_of(request).runtime
    if verb not in VERBS or campaign_id > MAX_ID:
        return refusal(request, session, 404, "not_found", "There is no such campaign.")
    try:
        if verb in CONTROLS:
            await control_campaign(appliance, parts_of(request).sender, campaign_id,
                                   session.account_id, verb)
        else:
            await resolve_all(appliance, campaign_id, session.account_id, verb,
                              console_actor(session), wake_sender=parts_of(request).sender.wake)
    except Refused as exc:
        return refusal(request, session, refusal_status(exc), exc.error, exc.message)
    return RedirectResponse(f"/campaigns/{campaign_id}?done={verb}", status_code=303)


async def resolve_message(request: Request, session: ConsoleSession, form: FormData) -> Response:
    ref = request.path_params["ref"].upper()
    action = form.get("action")
    if not looks_like_ref(ref) or action not in resolution.ACTIONS:
        return refusal(request, session, 404, "not_found", "There is no such message.")
    try:
        await resolve_one(parts_of(request).runtime, ref, session.account_id, str(action),
                          console_actor(session), wake_sender=parts_of(request).sender.wake)
    except Refused as exc:
        return refusal(request, session, refusal_status(exc), exc.error, exc.message)
    return RedirectResponse(f"/messages?q={ref}&resolved={action}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/campaigns/{campaign_id:int}/{verb}", console_page(confirm), methods=["GET"]),
        Route("/campaigns/{campaign_id:int}/{verb}", console_page(act), methods=["POST"]),
        Route("/messages/{ref}/resolve", console_page(resolve_message), methods=["POST"]),
    ]
