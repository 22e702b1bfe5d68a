"""``appliance account webhook NAME``: give an account its own receiver, or take it away.

``--url URL`` with ``--secret S`` (asked for, hidden and twice, when not given: a secret
typed on the command line stays in the shell's history) sets the account's receiver, or
its new URL or secret; ``--clear`` removes it, and the account's events go to the
``[webhooks]`` receiver again (those still waiting too). What is refused, in one line
each: an account that does not exist, a URL that is not an ``http://`` or ``https://``
one with a host, an empty secret, ``--clear`` beside ``--url`` or ``--secret``.
"""

from __future__ import annotations

from collections.abc import Callable

from appliance.accounts import AccountChoice, choose_account
from appliance.runtime import Runtime
from appliance.webhooks.receivers import (
    clear_account_receiver,
    secret_problem,
    set_account_receiver,
    shown_url,
    url_problem,
)


class ReceiverRefused(ValueError):
    """The command cannot do what it was asked (the message says why)."""


def check_arguments(url: str | None, secret: str | None, clear: bool) -> None:
    if clear and (url is not None or secret is not None):
        raise ReceiverRefused("--clear takes no --url or --secret")
    if not clear and url is None:
        raise ReceiverRefused("give --url URL (and --secret S, or be asked for it),"
                              " or --clear to remove the account's receiver")
    if url is not None and (problem := url_problem(url)) is not None:
        raise ReceiverRefused(f"--url {url!r} {problem}")
    if secret is not None and (problem := secret_problem(secret)) is not None:
        raise ReceiverRefused(problem)


def run_account_webhook(appliance: Runtime, name: str, url: str | None, secret: str | None,
                        clear: bool, ask_secret: Callable[[], str]) -> str:
    """Do it; the line to print. ``ask_secret`` is called (after the account and the URL
    were found good) when ``--url`` came without ``--secret``."""
    check_arguments(url, secret, clear)
    try:
        account = appliance.store.readers.call(lambda c: choose_account(c, name))
    except AccountChoice as exc:
        raise ReceiverRefused(str(exc)) from None
    now = appliance.now_ms()
    if clear:
        moved = appliance.store.writer.call(lambda c: clear_account_receiver(c, account.id))
        if moved is None:
            return (f"account {account.name} has no receiver of its own: its events go to"
                    " the [webhooks] receiver")
        return (f"account {account.name}'s receiver removed: its events go to the [webhooks]"
                f" receiver from now on ({moved} waiting events handed over)")
    assert url is not None
    if secret is None:
        secret = ask_secret()
        if (problem := secret_problem(secret)) is not None:
            raise ReceiverRefused(problem)
    given = secret
    appliance.store.writer.call(
        lambda c: set_account_receiver(c, account.id, url, given, now))
    return (f"account {account.name}'s events (message status, inbound) now go to"
            f" {shown_url(url)} only, signed with its secret")
