"""The checks a send or a campaign passes before anything is written (API and console).

Each takes a value as the client gave it (any JSON value, or a form's text) and
returns it as the store takes it, or raises :class:`~appliance.refusals.Invalid` with
the code and the facts the API answers (``docs/api.md``): ``invalid_to``,
``invalid_body``, ``body_too_long``, ``unsendable_body``, ``no_provider``,
``unknown_provider``, ``invalid_priority``, ``invalid_template``, ``invalid_send_at``,
``invalid_window``, ``invalid_list``, ``invalid_action``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from appliance.config import ProviderSettings, Settings
from appliance.imports.accept import MAX_LIST_NAME
from appliance.message_text.segments import Unsendable, check_sendable
from appliance.refusals import Invalid
from appliance.sending.campaigns import PRIORITIES, PRIORITY_HIGH
from appliance.sending.dry_run import DryRun
from appliance.sending.personalise import TemplateError
from appliance.sending.personalise import parse as parse_template
from appliance.sending.resolution import ACTIONS
from appliance.sending.windows import BadWindow, SendWindow

MAX_MSISDN_CHARS = 64
MAX_PARTS_DEFAULT = ProviderSettings.max_parts


def check_body(settings: Settings, value: Any, provider: str | None = None,
               msisdn: str = "") -> str:
    """A message body as sent; :class:`Invalid` otherwise.

    The body must also be sendable through ``provider`` (a configured provider's name;
    the default limits for ``None``): encodable as SMS (no lone surrogate) and no more
    parts than the provider's ``max_parts``. That refusal is ``unsendable_body`` with
    the ``reason`` (``lone_surrogate`` or ``too_many_parts``) and, for too many parts,
    the ``limit`` and the ``parts`` the body would need. Parts are counted as the
    provider sends to ``msisdn`` (with the Turkish tables where it uses them, ENC-1).
    """
    limit = settings.sending.max_body_chars
    if not isinstance(value, str) or not value.strip():
        raise Invalid("invalid_body", "'body' must be a non-empty string")
    if len(value) > limit:
        raise Invalid("body_too_long",
                      f"'body' has {len(value)} characters; the limit is {limit}",
                      limit=limit, submitted=len(value))
    if "\x00" in value:
        raise Invalid("invalid_body", "'body' must not contain NUL characters")
    chosen = settings.providers.get(provider or "")
    max_parts = chosen.max_parts if chosen is not None else MAX_PARTS_DEFAULT
    try:
        # No number yet (a campaign's template): as the provider sends to its own country.
        check_sendable(value, max_parts,
                       chosen.counting_to(msisdn) if chosen is not None else False)
    except Unsendable as exc:
        extra: dict[str, Any] = {"reason": exc.reason}
        text = f"'body' cannot be sent: {exc}"
        if exc.limit is not None:
            extra.update(limit=exc.limit, parts=exc.parts)
            if chosen is not None:
                text += f" of provider {chosen.name!r} ([providers.{chosen.name}] max_parts)"
        raise Invalid("unsendable_body", text, **extra) from None
    return value


def check_provider(settings: Settings, value: Any) -> str:
    """A configured provider's name, the default one for ``None``."""
    if value is None:
        name = settings.default_provider
        if not name:
            raise Invalid("no_provider", "no provider is configured")
        return name
    if not isinstance(value, str) or value not in settings.providers:
        known = ", ".join(settings.providers) or "none"
        raise Invalid("unknown_provider",
                      f"'provider' must be one of the configured providers ({known})")
    return value


def check_to(settings: Settings, value: Any, field: str = "to") -> str:
    """A recipient as E.164 (the default region applies); the refusal names ``field``.
    (phonenumbers is imported by the first one, not with the server.)"""
    from appliance.imports.normalise import Invalid as InvalidNumber
    from appliance.imports.normalise import normalise_msisdn

    if not isinstance(value, str) or len(value) > MAX_MSISDN_CHARS:
        raise Invalid("invalid_to", f"'{field}' must be a phone number string")
    found = normalise_msisdn(value, settings.imports.default_region)
    if isinstance(found, InvalidNumber):
        raise Invalid("invalid_to", f"'{field}' is not a number we can send to: "
                      f"{found.reason}", reason=found.reason)
    return found.msisdn


def check_priority(value: Any) -> int:
    """``"high"`` (the default for a single message) or ``"normal"``."""
    if value is None:
        return PRIORITY_HIGH
    if not isinstance(value, str) or value not in PRIORITIES:
        raise Invalid("invalid_priority", "'priority' must be \"high\" or \"normal\"")
    return PRIORITIES[value]


def check_list(value: Any) -> str:
    """The name of one of the account's lists, as a campaign names it."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LIST_NAME:
        raise Invalid("invalid_list", "give the name of one of your lists as 'list'")
    return value.strip()


def check_template(body: str) -> None:
    """A campaign body must be a template we can render: the refusal names what is wrong."""
    try:
        parse_template(body)
    except TemplateError as exc:
        raise Invalid("invalid_template", f"'body': {exc}",
                      placeholder=exc.placeholder) from None


def check_send_at(value: Any) -> int | None:
    """``send_at`` as epoch ms: ISO 8601 with ``Z`` (or an offset)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 40:
        raise Invalid("invalid_send_at", "'send_at' must be a time in ISO 8601 UTC,"
                      " such as 2026-12-01T09:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise Invalid("invalid_send_at", f"'send_at' is not an ISO 8601 time: {value!r}"
                      ) from None
    if parsed.tzinfo is None:
        raise Invalid("invalid_send_at", "'send_at' must say it is UTC (end it with Z)")
    return int(parsed.timestamp() * 1000)


def check_window(value: Any) -> SendWindow | None:
    """A sending window (``{"from", "to", "tz"}``); the refusal names the ``field``."""
    if value is None:
        return None
    try:
        return SendWindow.parse(value)
    except BadWindow as exc:
        raise Invalid("invalid_window", str(exc), field=exc.field) from None


def check_longest(settings: Settings, plan: DryRun, provider: str) -> None:
    """The longest personalised text must be sendable through the provider."""
    if not plan.personalised or not plan.longest_text:
        return
    try:
        check_body(settings, plan.longest_text, provider)
    except Invalid as exc:
        raise Invalid(exc.error, "after personalisation, the longest message"
                      f" cannot be sent: {exc.message}", **exc.extra) from None


def check_action(value: Any) -> str:
    """A decision about an ``UNCERTAIN`` message: ``resend`` or ``mark_failed``."""
    if value not in ACTIONS:
        raise Invalid("invalid_action", "'action' must be \"resend\" or \"mark_failed\"")
    return str(value)
