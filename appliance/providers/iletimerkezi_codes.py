"""İletimerkezi's status codes, every one its documentation lists, and what each means here.

From İletimerkezi's API documentation (repository ``iletimerkezi/apidocs-website``:
``docs/status-codes.mdx``, "Durum kodları ve mesajlar", the table every answer's
``response.status.code`` is read against; ``src/components/ErrorCodeTable.js`` for each
code's description; ``docs/sms/send/json.mdx`` for the codes a send may answer:
400, 401, 402, 450, 451, 452, 453, 454, 457, 468, 469, 470), cross-checked with the
official client libraries ``iletimerkezi/iletimerkezi-python`` and
``iletimerkezi/iletimerkezi-php`` (``responses/report_response.py``,
``src/Responses/ReportResponse.php``: 110-115).

A send answer's code becomes an :class:`~appliance.providers.outcome.Outcome` here
(:func:`send_outcome`), before the common "other 4xx: REJECTED" rule: no credit, a
başlık not approved and credentials refused hold the provider's lane (``blocked``); a
duplicate order is ``REJECTED`` and never sent again; a code the documentation does not
list for a send is ``UNCERTAIN`` (DLR-8: never a made-up final state).
"""

from __future__ import annotations

from appliance.states import UNKNOWN_WORD_STATE

from .iys import IYS_ERROR
from .outcome import Outcome, SubmitResult, blocked, short

CODE_TEXT: dict[int, str] = {
    110: "message is being sent",
    111: "message sent",
    112: "message not sent",
    113: "order is still being sent",
    114: "order completed",
    115: "order not sent",
    200: "successful operation",
    400: "request could not be processed",
    401: "membership details incorrect",
    402: "insufficient balance",
    404: "API does not support the requested method",
    422: "values in the request could not be validated",
    450: "the sender title (başlık) is not approved for use",
    451: "duplicate order",
    452: "invalid message recipients",
    453: "order size exceeded",
    454: "message text is empty",
    455: "order not found",
    456: "order sending date has not yet arrived",
    457: "invalid message sending date format",
    458: "invalid date range",
    459: "sender title cannot be empty",
    460: "title must not exceed 11 characters nor hold Turkish characters",
    461: "group name cannot be blank",
    462: "group id cannot be blank",
    463: "no such group",
    464: "page value must start from 1",
    465: "no person found",
    466: "invalid number",
    467: "document information is missing",
    468: "whether to query İYS must be set",
    469: "the İYS list must be chosen: BIREYSEL or TACIR",
    470: "the İYS code must be set",
    471: "search term must be at least 3 characters",
    472: "one of first name, last name, mobile phone, email must be filled",
    473: "no custom field found",
    503: "server temporarily unavailable",
}
"""Every status code the documentation lists (``docs/status-codes.mdx``), in its words."""

OK = 200
ORDER_NOT_FOUND = 455
ORDER_NOT_YET_DUE = 456

# A send answered with one of these codes: the lane holds until the operator acts
# (the reason, for the ``provider_blocked`` alert). 401 is also the answer to a
# request from an address the account's allow-list does not hold: one code for both.
BLOCKING: dict[int, str] = {
    401: "credentials",
    402: "no_credit",
    450: "sender_not_registered",
    459: "sender_not_registered",
    460: "sender_not_registered",
}

# The order was refused for its recipients: with one number, that number is refused;
# with many, the documentation does not say which, and nothing was sent.
RECIPIENT_CODES = frozenset({452, 466})

# Refused for good: the same request would be refused again (451: the same text to the
# same numbers within 10 minutes, refused so that nobody gets it twice).
PERMANENT = frozenset({400, 422, 451, 453, 454, 457, 468, 469, 470})

# The provider could not take it now: nothing was sent, try again later.
TRANSIENT = frozenset({404, 503})

# A message's report status (``get-report`` ``order.message[].status``) and the word
# the webhook writes for the same fact (``docs/sms/report/webhook.mdx``: accepted,
# delivered, undelivered): a pulled and a pushed "delivered" are one fact.
MESSAGE_STATUS_WORD: dict[int, str] = {110: "accepted", 111: "delivered", 112: "undelivered"}

WORD_STATES: dict[str, str] = {
    "accepted": "ACCEPTED",
    "delivered": "DELIVERED",
    "undelivered": "FAILED",
}
"""The webhook's status words (and the pulled codes' words) as our report states."""

IYS_CODES = frozenset({468, 469, 470})
"""Refused for İYS: the message ends ``REJECTED`` with ``error_kind`` ``"iys"``."""


def code_text(code: int) -> str:
    """``iletimerkezi 452 invalid message recipients`` (the code alone when unlisted)."""
    text = CODE_TEXT.get(code)
    return f"iletimerkezi {code} {text}" if text else f"iletimerkezi {code} (undocumented)"


def send_outcome(code: int, message: str, *, many: bool) -> Outcome:
    """The outcome of a send answered with ``code`` (not 200) and the provider's own
    ``message``. ``many``: the order held more than one number."""
    said = f"{code_text(code)}: {message}" if message else code_text(code)
    if code in IYS_CODES:
        said = f"iys: {said}"
    error = short(said)
    if code in BLOCKING:
        return blocked(BLOCKING[code], error)
    if code in RECIPIENT_CODES:
        if many:
            # Which number was refused is not said and nothing was sent: each message
            # of the order may go again (alone it is refused for its own number).
            return Outcome(SubmitResult.RETRY, retry_after_s=60.0,
                           error=short(f"order of many refused: {said}"))
        return Outcome(SubmitResult.REJECTED, error=error)
    if code in PERMANENT:
        return Outcome(SubmitResult.REJECTED, error=error,
                       error_kind=IYS_ERROR if code in IYS_CODES else None)
    if code in TRANSIENT or (500 <= code < 600 and code != 504):
        return Outcome(SubmitResult.RETRY, retry_after_s=60.0, error=error)
    return Outcome(SubmitResult.UNCERTAIN, error=error)


def report_state(word: str) -> str:
    """Our report state for a webhook status word (unknown: kept, intermediate)."""
    return WORD_STATES.get(word, UNKNOWN_WORD_STATE)
