"""The proof a provider that signs nothing can give: a token in the callback's URL.

The local aggregators (Netgsm, İletimerkezi, Verimor) sign neither their report pushes
nor their inbound ones. The operator enters the callback URL in the provider's panel
with ``?token=<callback_token>`` (``config check`` prints it); a push without the token,
or with another, is ``401`` and nothing is stored. Without a ``callback_token`` any
push to ``/callbacks/NAME`` is taken as it comes, and ``config check`` warns: anyone who
knows the URL can then mark messages delivered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol
from urllib.parse import parse_qs

from appliance.config import Settings

from .callbacks import AuthError, CallbackRequest
from .wire_text import secrets_equal

CALLBACK_TOKEN = "callback_token"
"""The option every kind that signs nothing declares (a secret)."""


class DeclaresToken(Protocol):
    """A kind's declaration, as far as the token is concerned."""

    def option_names(self) -> frozenset[str]: ...


def check_callback_token(req: CallbackRequest, token: str) -> None:
    """Raise :class:`AuthError` unless ``token`` is empty (none configured) or the
    request's query carries exactly it once as ``token``."""
    if not token:
        return
    given = parse_qs(req.query, keep_blank_values=True).get("token", [])
    if len(given) != 1 or not secrets_equal(given[0], token):
        raise AuthError("callback token missing or wrong")


def with_token(url: str, token: str) -> str:
    """``url`` with ``token=<token>`` added to its query (unchanged without a token)."""
    if not token:
        return url
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}token={token}"


def token_warnings(settings: Settings, kinds: Mapping[str, DeclaresToken]) -> list[str]:
    """One warning per provider of a kind that signs nothing and has no
    ``callback_token``: its pushes are taken as they come."""
    out = []
    for name, provider in settings.providers.items():
        kind = kinds.get(provider.kind)
        if kind is None or CALLBACK_TOKEN not in kind.option_names():
            continue
        if not provider.option(CALLBACK_TOKEN, ""):
            out.append(
                f"provider {name}: no callback_token: {provider.kind} signs nothing, so"
                f" anyone who knows {settings.callback_url(name)} can mark its messages"
                " delivered or file inbound messages. Set callback_token and enter the"
                " URL 'config check' prints in the provider's panel.")
    return out


def panel_urls(settings: Settings, kinds: Mapping[str, DeclaresToken]) -> list[str]:
    """The URL to enter in the panel of each provider of a kind that signs nothing, its
    token included (``config check`` prints them)."""
    out = []
    for name, provider in settings.providers.items():
        kind = kinds.get(provider.kind)
        if kind is None or CALLBACK_TOKEN not in kind.option_names():
            continue
        url = with_token(settings.callback_url(name), str(provider.option(CALLBACK_TOKEN, "")))
        out.append(f"provider {name}: the URL for reports and inbound messages in the"
                   f" provider's panel: {url}")
    return out
