"""Bearer-key authentication for ``/api/*``."""

from __future__ import annotations

from starlette.requests import Request

from appliance.accounts import Account, account_for_key
from appliance.web.errors import ApiError
from appliance.web.parts import parts_of


async def require_account(request: Request) -> Account:
    """The account whose key is in ``Authorization: Bearer``; else a 401 ApiError."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise ApiError(401, "unauthorized", "send the API key as 'Authorization: Bearer <key>'")
    if len(key) > 200:
        raise ApiError(401, "unauthorized", "invalid API key")
    appliance = parts_of(request).runtime
    account = await appliance.store.readers.run(lambda c: account_for_key(c, key))
    if account is None:
        raise ApiError(401, "unauthorized", "invalid API key")
    return account
