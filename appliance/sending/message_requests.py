"""What a client asks about single messages, through the API or the console.

Queueing one (:func:`queue_message`) and deciding about an ``UNCERTAIN`` one
(:func:`resolve_one`): each runs its write unit on the writer, wakes the sender when
there is something to send, and says a refusal as a :class:`~appliance.refusals.Refused`
(the web layer answers it: ``docs/api.md``). The checks of what was sent are
:mod:`appliance.sending.checks`.
"""

from __future__ import annotations

from appliance.key_quotas import KeyQuota, charge_messages
from appliance.optout.consents import NoConsent
from appliance.optout.suppressions import Suppressed
from appliance.refusals import Conflict, Invalid, no_such
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.sending.accept import (
    Accepted,
    IdempotencyConflict,
    NewMessage,
    insert_unless_suppressed,
)
from appliance.sending.duplicates import DuplicateToday
from appliance.sending.messages import get_message
from appliance.sending.refs import new_ref
from appliance.sending.resolution import NotUncertain, resolve_message
from appliance.store.connection import Connection


def suppressed_refusal(exc: Suppressed) -> Conflict:
    """The refusal of a send to a number on the suppression list (OPS-4)."""
    entry = exc.entry
    why = f" ({entry.reason})" if entry.reason else ""
    return Conflict("suppressed",
                    f"{entry.msisdn} is on the suppression list{why}; nothing was queued",
                    msisdn=entry.msisdn, reason=entry.reason, source=entry.source)


async def queue_message(runtime: Runtime, new: NewMessage, *, wake_sender: Wake,
                        quota: KeyQuota | None = None) -> Accepted:
    """Queue one checked message (``QUEUED``) under a new ref, and wake the sender.

    A repeat of an idempotent send gives back the first message (``created`` false,
    the sender is not woken, nothing counted). Refused: ``idempotency_key_reused`` (the
    key was used for another message), ``suppressed`` (nothing was queued) and
    ``daily_limit`` (``quota``'s, counted in the same unit: :mod:`appliance.key_quotas`).
    """
    now = runtime.now_ms()
    ref = new_ref(now)

    def unit(c: Connection) -> Accepted:
        accepted = insert_unless_suppressed(c, new, ref, now)
        if accepted.created:
            charge_messages(c, quota, 1, now)
        return accepted

    try:
        accepted = await runtime.store.writer.run(unit)
    except IdempotencyConflict as exc:
        raise Invalid("idempotency_key_reused", str(exc)) from None
    except Suppressed as exc:
        raise suppressed_refusal(exc) from None
    except DuplicateToday as exc:
        raise Conflict("duplicate_today", f"{exc} already has this text through this"
                       " sender today (Europe/Istanbul); nothing was queued") from None
    except NoConsent as exc:
        raise Conflict("no_consent", f"{exc}: a commercial message needs ONAY (İYS);"
                       " nothing was queued", msisdn=exc.msisdn,
                       consent=exc.found.status if exc.found else None) from None
    if accepted.created:
        wake_sender()
    return accepted


async def resolve_one(runtime: Runtime, ref: str, account_id: int, action: str,
                      actor: str, *, wake_sender: Wake) -> str:
    """Decide about one ``UNCERTAIN`` message of the account; returns its new state.

    Refused: ``not_found`` (no such message) and ``not_uncertain`` (with its ``state``:
    a report or another decision came first). A resend wakes the sender.
    """
    now = runtime.now_ms()

    def unit(c: Connection) -> str:
        m = get_message(c, ref, account_id)
        if m is None:
            raise LookupError(ref)
        return resolve_message(c, m.id, action, actor, now)

    try:
        state = await runtime.store.writer.run(unit)
    except LookupError:
        raise no_such("message") from None
    except NotUncertain as exc:
        raise Conflict("not_uncertain", str(exc), state=exc.state) from None
    if state == "RETRY":
        wake_sender()
    return state
