"""Netgsm's own codes, and what each means here (the kind of :mod:`.netgsm`).

Netgsm's documentation (netgsm.com.tr/dokuman) is not among the stored sources, so the
reference is Netgsm's own published client library, the ``netgsm/sms`` Composer package
(``src/SmsSend.php`` and ``README.md`` of the ``netgsm/sms`` repository on GitHub), which
carries the documentation's tables verbatim, in Turkish: the send answers
(``smsGonder``, ``smsgonder1_1``), the report's states, its ``hatakod`` operator errors
and its query answers (``smsSorgulama``), the balance answers (``kredisorgu``) and the
inbound query's answers (``gelensms``). Two codes it does not carry come from Netgsm's
official JavaScript SDK (``src/enums.ts`` of ``netgsm/netgsm-sms-js``, the same API's
REST form): send ``100``/``101`` (system error) and the report states ``14`` to ``17``.
A code in none of these tables is never given a final meaning (DLR-8).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from appliance.message_text.alphabets import TURKISH_SINGLE
from appliance.message_text.segments import Counting


class SendVerdict(StrEnum):
    """What a send answer's code means for the messages of the request."""

    ACCEPTED = "accepted"  # a task (bulk id) was made
    REJECTED = "rejected"  # the request can never go as it is: final
    CREDENTIALS = "credentials"  # the lane holds: credentials, API access or the address
    SENDER_NOT_REGISTERED = "sender_not_registered"  # the başlık is not the account's
    IYS = "iys"  # refused for İYS: final, the message's error names İYS
    RATE = "rate"  # the account's send limit: nothing made, tried again later
    DUPLICATE = "duplicate"  # the same number too often: final alone, again in a batch
    SYSTEM = "system"  # Netgsm's system error: nothing made, tried again later


@dataclass(frozen=True)
class SendCode:
    verdict: SendVerdict
    meaning: str  # the reference's explanation, in English


SEND_CODES: dict[str, SendCode] = {
    "00": SendCode(SendVerdict.ACCEPTED, "taken; no error in the dates"),
    "01": SendCode(SendVerdict.ACCEPTED,
                   "taken; the start date was wrong and the system date was used"),
    "02": SendCode(SendVerdict.ACCEPTED,
                   "taken; the stop date was wrong and the system date was used"),
    "20": SendCode(SendVerdict.REJECTED,
                   "a problem in the message text, or over the maximum length (917)"),
    "30": SendCode(SendVerdict.CREDENTIALS,
                   "invalid user code or password, no API access, or this address is"
                   " not in the account's allowed IPs"),
    "40": SendCode(SendVerdict.SENDER_NOT_REGISTERED,
                   "the message header (sender name) is not defined for the account"),
    "50": SendCode(SendVerdict.IYS, "İYS-checked sending is not open to this account"),
    "51": SendCode(SendVerdict.IYS, "no İYS brand is defined for the subscription"),
    "70": SendCode(SendVerdict.REJECTED,
                   "invalid request: a parameter is wrong or a required one is missing"),
    "80": SendCode(SendVerdict.RATE, "send limit exceeded"),
    "85": SendCode(SendVerdict.DUPLICATE,
                   "duplicate send limit: more than 20 tasks for one number in a minute"),
    "100": SendCode(SendVerdict.SYSTEM, "system error"),
    "101": SendCode(SendVerdict.SYSTEM, "system error"),
}
"""Every code the reference lists as a send's answer (``smsGonder``'s ``$sonuc``)."""

# -- the report query (``smsSorgulama``) ---------------------------------------------------

REPORT_STATES: dict[str, tuple[str, str]] = {
    "0": ("ENROUTE", "waiting to be delivered"),
    "1": ("DELIVERED", "delivered"),
    "2": ("EXPIRED", "timed out"),
    "3": ("REJECTED", "invalid or restricted number"),
    "4": ("FAILED", "could not be sent to the operator"),
    "11": ("REJECTED", "not accepted by the operator"),
    "12": ("FAILED", "send error"),
    "13": ("REJECTED", "duplicate"),
    "14": ("REJECTED", "not enough credit"),
    "15": ("REJECTED", "blacklisted number"),
    "16": ("REJECTED", "refused by İYS"),
    "17": ("FAILED", "İYS error"),
    "103": ("FAILED", "the whole task failed"),
}
"""Every message state the reference lists (``$state``; 14-17 from the JS SDK's
``SmsStatus``) -> our state and its meaning. ``100`` ("every state") is a query filter,
never a state: it is not here."""

PENDING_STATES = frozenset({"0"})

IYS_STATES = frozenset({"16", "17"})
"""States that are İYS's refusal: the message's error names İYS."""

REPORT_ERRORS: dict[str, str] = {
    "101": "mailbox full",
    "102": "switched off or out of coverage",
    "103": "busy",
    "104": "line not active",
    "105": "wrong number",
    "106": "SMS refused, blacklist",
    "111": "timeout",
    "112": "the device does not take SMS",
    "113": "the device does not support it",
    "114": "routing failed",
    "115": "barred",
    "116": "unknown subscriber",
    "117": "illegal subscriber",
    "119": "system error",
}
"""The operators' ``hatakod`` a report line may carry (``0``: no error)."""

REPORT_QUERY_ERRORS: dict[str, str] = {
    "30": "invalid user code or password, no API access, or the address not allowed",
    "60": "no record matches the query",
    "70": "invalid query: a parameter is wrong or a required one is missing",
    "80": "query limit exceeded: at most 10 a minute",
}
"""The report query's one-code answers; ``100`` to ``110`` are system errors."""

NO_RECORDS = "60"

# -- the balance query (``kredisorgu``) and the inbound query (``gelensms``) ---------------

BALANCE_ERRORS: dict[str, str] = {
    "30": "invalid user code or password, no API access, or the address not allowed",
    "70": "invalid query: a parameter is wrong or a required one is missing",
}

INBOUND_QUERY_ERRORS: dict[str, str] = {
    "30": "invalid user code or password, no API access, or the address not allowed",
    "40": "no message to show",
    "50": "invalid date format (ddMMyyyyHHmm)",
    "60": "startdate and stopdate more than 30 days apart",
    "70": "invalid query: a parameter is wrong or a required one is missing",
}

NO_MESSAGES = "40"

# -- encoding ------------------------------------------------------------------------------

ENCODING = {"GSM-7 Turkish": "TR"}
"""``encoding`` for each encoding decided at acceptance: ``TR`` for Turkish characters
(the reference: "Türkçe karakter desteği isteniyorsa bu alana TR girilmeli"), else left
empty."""

COUNTING = Counting(tables=(TURKISH_SINGLE,), unwritten=frozenset("èìØøÆæ¡¿"))
"""How the appliance counts what Netgsm sends with ``encoding`` ``TR``. The reference
says only that the switch asks for Turkish characters and that "SMS boyu hesabı ve
ücretlendirme" (length and price) then change: not which table it signals nor how it
counts. One switch is one table (one shift element: 155 septets in one part, 149 each
of several); the appliance counts as the costlier of the two, the single shift (each
Turkish letter two septets), and writes only what both tables hold (not ``è ì Ø ø Æ æ
¡ ¿``, which the locking table replaces: such a text goes as UCS-2). So the parts shown
are never fewer than Netgsm bills with either table."""

NOT_COMMERCIAL, TO_INDIVIDUALS, TO_TRADERS = "0", "11", "12"
IYS_FILTERS = (NOT_COMMERCIAL, TO_INDIVIDUALS, TO_TRADERS)
"""``filter``: 0 not commercial, 11 commercial to individuals (İYS-checked), 12
commercial to merchants (İYS-checked)."""


def report_error_text(code: str) -> str | None:
    """A report line's ``hatakod`` as the error kept with the report: ``"102 switched off
    or out of coverage"``; the bare code when the reference does not name it; ``None``
    for ``0``."""
    text = code.strip()
    if not text or text.strip("0") == "":
        return None
    meaning = REPORT_ERRORS.get(text)
    return f"{text} {meaning}" if meaning else text[:40]


def is_system_error(code: str) -> bool:
    """``100`` to ``110``: the report query's system errors."""
    return code.isdigit() and 100 <= int(code) <= 110
