"""Refusals: a request the appliance will not carry out, said in the domain's words.

The use cases (sending a message, starting or steering a campaign, resolving an
``UNCERTAIN`` message, re-running an import) and their checks raise one of these, the
same for the HTTP API and the console. Each carries a stable code (``error``, what
users' scripts read), a sentence for a person, and the facts that go with it
(``extra``). The kind of refusal is its class; the web layer maps each kind to its
status (:data:`appliance.web.errors.REFUSAL_STATUS`) and answers the JSON error the
API has always answered, and the console shows the sentence.
"""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A request refused: ``error`` (a stable code), ``message``, and ``extra`` facts."""

    def __init__(self, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.extra = extra


class Malformed(Refused):
    """The request is incomplete or not in the expected shape (a header, a form)."""


class Invalid(Refused):
    """What was asked is not something the appliance can do (a field's value)."""


class NotFound(Refused):
    """No such thing, or not the asker's."""


class Conflict(Refused):
    """Things as they are now forbid it (a state, a suppressed number, a running job)."""


class Gone(Refused):
    """It existed and is no longer kept (retention pruned it)."""


class TooLarge(Refused):
    """More than a limit takes (bytes, rows): split it and send it in parts."""


class TooMany(Refused):
    """Past a limit of the caller's (its key's rate or daily limit): again in
    ``retry_after_s`` seconds."""

    def __init__(self, error: str, message: str, retry_after_s: int, **extra: Any) -> None:
        super().__init__(error, message, **extra)
        self.retry_after_s = retry_after_s


class Unavailable(Refused):
    """The appliance cannot take it now (its disk is nearly full): try again later."""


def no_such(what: str) -> NotFound:
    """The refusal for a thing that does not exist for this account."""
    return NotFound("not_found", f"no such {what}")
