"""The proof a provider that signs nothing can give: a token in the callback's URL.

The local aggregators (Netgsm, İletimerkezi, Verimor) sign neither their report pushes
nor their inbound ones. The operator enters the callback URL in the provider's panel
with ``?token=<callback_token>`` (``config check`` prints it); a push without the token,
or with another, is ``401`` and nothing is stored. Without a ``callback_token`` any
push to ``/callbacks/NAME`` is taken as it comes, and ``config check`` warns: anyone who
knows the URL can then mark messages delivered.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from .callbacks import AuthError, CallbackRequest
from .wire_text import secrets_equal

CALLBACK_TOKEN = "callback_token"
"""The option every kind that signs nothing declares (a secret)."""


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
