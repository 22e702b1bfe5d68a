"""What a submission came to: the message handed to a transport, and its outcome.

Outcomes, from the money point of view: a request that never left the process is
``RETRY``; one that may have reached the provider (timeout after writing, a dropped
connection, an unreadable answer) is ``UNCERTAIN``: not resent automatically unless the
provider dedupes on our ref (``dedupes_on_ref``); a delivery report resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .iys import Iys

# Upper bound on what we keep of a provider's error text in an Outcome.
_ERROR_MAX = 200


BLOCKED_REASONS = ("no_credit", "sender_not_registered", "address_not_allowed",
                   "credentials")
"""Why a provider may refuse everything until its operator acts (``Outcome.blocked``)."""


def blocked(reason: str, error: str, retry_after_s: float = 60.0) -> Outcome:
    """The outcome of a submission the provider refused for ``reason`` (one of
    :data:`BLOCKED_REASONS`): the lane holds and tries again in ``retry_after_s``."""
    if reason not in BLOCKED_REASONS:
        raise ValueError(f"not a blocked reason: {reason!r}")
    return Outcome(SubmitResult.RETRY, retry_after_s=retry_after_s, error=short(error),
                   unreached=True, blocked=reason)


class SubmitResult(StrEnum):
    """What a submission attempt came to, from the money point of view."""

    ACCEPTED = "ACCEPTED"  # the provider took it (and normally gave an id)
    RETRY = "RETRY"  # the provider did not take it; safe to send again later
    REJECTED = "REJECTED"  # permanent refusal: final, never resent
    UNCERTAIN = "UNCERTAIN"  # may or may not have been taken: not resent blindly


@dataclass(frozen=True)
class PartOutcome:
    """What came of one part of a message, for a provider that answers per part.

    ``part`` counts from 1 in the provider's order (Vonage's ``messages[]``, SMPP's
    segments). ``ACCEPTED`` carries the part's own id; ``REJECTED`` is final for that
    part; ``RETRY`` (a session transport only: that segment was not taken) means the
    part is sent again by a later attempt; ``UNCERTAIN`` means it may have been taken
    and is never sent again blindly.
    """

    part: int
    result: SubmitResult
    provider_msg_id: str | None = None
    error: str | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Outcome:
    """The verdict on one submission.

    ``parts`` is empty when the provider answered for the message as a whole: then an
    ``ACCEPTED`` outcome is one part carrying ``provider_msg_id`` (Twilio and Infobip
    bill the parts behind one id). When the provider answered per part, ``parts`` lists
    every part this submission tried (every part not in the message's
    ``skip_parts``), and ``result``, ``provider_msg_id`` and ``error`` summarise them
    (:meth:`of_parts`); the sender records the parts.
    """

    result: SubmitResult
    provider_msg_id: str | None = None
    retry_after_s: float | None = None
    error: str | None = None
    parts: tuple[PartOutcome, ...] = ()
    # RETRY because the provider could not be reached at all (connection refused, a
    # connect timeout, an SMPP session not bound): nothing left this process. Such an
    # attempt does not count against ``max_attempts`` and holds the provider's lane, so
    # an outage delays messages rather than rejecting them.
    unreached: bool = False
    # The provider refuses every message until its operator acts (no credit, a sender
    # header not registered, an address not allow-listed): the reason, one of
    # ``BLOCKED_REASONS``. Such an outcome is ``RETRY`` with ``unreached`` set: the
    # lane holds, attempts are not counted, the alert ``provider_blocked`` names the
    # provider and the reason, and the lane tries again after ``retry_after_s``.
    blocked: str | None = None
    # What kind of refusal a ``REJECTED`` outcome is: ``"iys"`` when the provider refused
    # it for İYS (no consent, İYS-checked sending not open); ``None`` otherwise.
    error_kind: str | None = None
    # The provider's own code for a refusal (Vonage's submit ``status``, the http kind's
    # ``error``), where a kind reads one: its kind's ``route_refusals`` say which codes
    # mean "this route cannot" (ROUTE-3), so a message of a route moves to the next
    # provider instead of ending ``REJECTED``.
    code: str | None = None

    @classmethod
    def of_parts(cls, parts: tuple[PartOutcome, ...], error: str | None = None) -> Outcome:
        """An outcome from per-part results; the summary says what the money did.

        ``ACCEPTED`` when any part was taken (a resend would duplicate it), else
        ``UNCERTAIN`` when any part may have been, else ``RETRY`` when any part may be
        sent again, else ``REJECTED``. The id is the first accepted part's; the wait is
        the longest a retried part asked for.
        """
        if not parts:
            raise ValueError("an outcome of parts needs at least one part")
        results = {p.result for p in parts}
        for result in (SubmitResult.ACCEPTED, SubmitResult.UNCERTAIN, SubmitResult.RETRY,
                       SubmitResult.REJECTED):
            if result in results:
                break
        first_id = next((p.provider_msg_id for p in parts
                         if p.result is SubmitResult.ACCEPTED and p.provider_msg_id), None)
        waits = [p.retry_after_s for p in parts
                 if p.result is SubmitResult.RETRY and p.retry_after_s is not None]
        if error is None:
            errors = [f"part {p.part}: {p.error}" for p in parts if p.error]
            error = short("; ".join(errors)) if errors else None
        return cls(result, provider_msg_id=first_id, retry_after_s=max(waits, default=None),
                   error=error, parts=tuple(sorted(parts, key=lambda p: p.part)))


@dataclass(frozen=True)
class OutgoingMessage:
    """One message as the sender hands it to a transport.

    ``skip_parts`` are parts an earlier attempt already got to the provider (or may
    have): a transport that submits part by part (SMPP) sends only the others and
    reports :class:`PartOutcome` values for those. Empty on a first attempt, and always
    for the HTTP kinds, which submit a message in one request. ``encoding`` is the one
    decided at acceptance (``"GSM-7"``, ``"GSM-7 Turkish"``, ``"UCS-2"``): a transport
    sends the parts the user was shown
    (:func:`appliance.message_text.segments.segment_as`). ``iys``: what the request says
    about İYS for it (:mod:`.iys`), ``None`` without compliance (the table's options).
    ``validity_s``: whole seconds of its validity left as it goes (ROUTE-4), within the
    kind's ``validity_range_s``; ``None``: the provider's own validity (no field sent).
    """

    ref: str
    msisdn: str
    body: str
    callback_url: str
    skip_parts: frozenset[int] = frozenset()
    encoding: str = "GSM-7"
    iys: Iys | None = None
    validity_s: int | None = None


def short(text: str, limit: int = _ERROR_MAX) -> str:
    """One line, at most ``limit`` characters: what goes into a message row."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

