"""``/keys``: the account's API keys: make one (shown once), revoke one.

A new key is shown on the page that answers the form, and never again (the store
keeps only its hash and prefix); reloading shows the list without it. Revoking asks
first, then sets ``revoked_at``: the very next request with that key is ``401``.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.accounts import SHOWN_PREFIX, add_key, get_key, list_keys, revoke_key
from appliance.console_sessions import ConsoleSession
from appliance.web.pages.guard import console_page, refusal
from appliance.web.pages.render import page
from appliance.web.parts import parts_of

MAX_ID = 2**62


async def _keys_page(request: Request, session: ConsoleSession, new_key: str | None = None,
                     status: int = 200) -> Response:
    account_id = session.account_id
    keys = await parts_of(request).runtime.store.readers.run(lambda c: list_keys(c, account_id))
    return page(request, "keys.html", session, status=status, title="API keys", keys=keys,
                new_key=new_key, new_prefix=new_key[:SHOWN_PREFIX] if new_key else "",
                revoked=request.query_params.get("revoked", "")[:SHOWN_PREFIX])


async def keys_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    return await _keys_page(request, session)


async def create(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    account_id = session.account_id
    key = await appliance.store.writer.run(lambda c: add_key(c, account_id, appliance.now_ms()))
    return await _keys_page(request, session, new_key=key, status=201)


async def confirm_revoke(request: Request, session: ConsoleSession, form: FormData) -> Response:
    key_id: int = request.path_params["key_id"]
    account_id = session.account_id
    found = None if key_id > MAX_ID else await parts_of(request).runtime.store.readers.run(
        lambda c: get_key(c, key_id, account_id))
    if found is None:
        return refusal(request, session, 404, "not_found", "There is no such key.")
    return page(request, "key_revoke.html", session, title="Revoke a key", key=found)


async def revoke(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    key_id: int = request.path_params["key_id"]
    account_id = session.account_id
    found = None if key_id > MAX_ID else await appliance.store.readers.run(
        lambda c: get_key(c, key_id, account_id))
    if found is None:
        return refusal(request, session, 404, "not_found", "There is no such key.")
    await appliance.store.writer.run(lambda c: revoke_key(c, found.id, appliance.now_ms()))
    return RedirectResponse(f"/keys?revoked={found.prefix}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/keys", console_page(keys_page), methods=["GET"]),
        Route("/keys", console_page(create), methods=["POST"]),
        Route("/keys/{key_id:int}/revoke", console_page(confirm_revoke), methods=["GET"]),
        Route("/keys/{key_id:int}/revoke", console_page(revoke), methods=["POST"]),
    ]
