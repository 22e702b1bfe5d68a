"""Verimor's own words, and what each means here (the kind of :mod:`.verimor`).

Everything in this module is transcribed from Verimor's API guide, "VERİMOR SMS API
DÖKÜMANI" (``user_guide.md`` of the ``verimor/SMS-API`` repository, also published as
developer.verimor.com.tr/smsapi), section "HATA KODLARI": the table of what a send may
answer ("Mesaj Gönderirken Dönebilecek Durumlar"), the table of a message's states in a
report or a status answer ("Mesaj Durumu Alınırken Dönebilecek Durumlar") and the
operators' ``gsm_error`` codes ("Mesaj Hata Kodları"); and ``datacoding`` from "SMS
GÖNDERİMİ (POST)" and "SMS BOY KARAKTER LİMİTLERİ". A word not in these tables is never
given a final meaning (DLR-8).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from appliance.message_text.alphabets import TURKISH_LOCKING
from appliance.message_text.segments import Counting


class SendVerdict(StrEnum):
    """What a refusal of a send request means for the messages in it."""

    REJECTED = "rejected"  # this message can never go as it is: final
    NO_CREDIT = "no_credit"  # the lane holds until the account is topped up
    SENDER_NOT_REGISTERED = "sender_not_registered"  # the başlık is not accepted
    NUMBER = "number"  # about one number: final alone, sent again in a batch


@dataclass(frozen=True)
class SendError:
    verdict: SendVerdict
    meaning: str  # the guide's explanation, in English


SEND_ERRORS: dict[str, SendError] = {
    "INVALID_SOURCE_ADDRESS": SendError(SendVerdict.SENDER_NOT_REGISTERED,
                                        "the sender header (başlık) was not accepted"),
    "MISSING_MESSAGE": SendError(SendVerdict.REJECTED, "no message text"),
    "MESSAGE_TOO_LONG": SendError(SendVerdict.REJECTED, "the message is too long"),
    "INVALID_PERIOD": SendError(SendVerdict.REJECTED,
                                "validity period not between 1 minute and 48 hours"),
    "INVALID_DELIVERY_TIME": SendError(SendVerdict.REJECTED,
                                       "send_at is invalid or in the past"),
    "INVALID_DATACODING": SendError(SendVerdict.REJECTED, "datacoding is invalid"),
    "MISSING_IYS_BRAND_CODE": SendError(SendVerdict.REJECTED,
                                        "commercial sending needs the header's İYS brand code"),
    "AHS_AUTHORIZATION_ERROR": SendError(SendVerdict.REJECTED,
                                         "İYS authorisation error (no AHS permission)"),
    "NO_AHS_BRAND_ERROR": SendError(SendVerdict.REJECTED, "no İYS brand for the tax number"),
    "COMMERCIAL_SENDING_ERROR_UNDER_150K": SendError(
        SendVerdict.REJECTED, "commercial sending not open to this account"),
    "INVALID_IYS_RECIPIENT_TYPE": SendError(SendVerdict.REJECTED,
                                            "iys_recipient_type must be BIREYSEL or TACIR"),
    "MISSING_DESTINATION_ADDRESS": SendError(SendVerdict.NUMBER, "no recipient"),
    "INVALID_DESTINATION_ADDRESS": SendError(SendVerdict.NUMBER,
                                             "invalid number format (905121234567 expected)"),
    "INVALID_UTF8": SendError(SendVerdict.REJECTED, "the text is not UTF-8"),
    "MUKERRER_RAPORLAMA": SendError(SendVerdict.NUMBER,
                                    "the same SMS was already sent within 24 hours"),
    "INSUFFICIENT_CREDITS": SendError(SendVerdict.NO_CREDIT, "not enough credit"),
    "FORBIDDEN_MESSAGE": SendError(SendVerdict.REJECTED, "the text has forbidden words"),
    "INVALID_CONSENT_DATE": SendError(SendVerdict.REJECTED, "invalid consent_date"),
    "MISSING_CONSENT": SendError(SendVerdict.REJECTED, "consent status missing"),
    "MISSING_CONSENT_DATE": SendError(SendVerdict.REJECTED, "consent_date missing"),
    "INVALID_RECIPIENT": SendError(SendVerdict.REJECTED, "invalid recipient type"),
    "INVALID_JSON": SendError(SendVerdict.REJECTED, "invalid JSON"),
    "MESSAGE_COUNT_LIMIT_EXCEEDED": SendError(SendVerdict.REJECTED,
                                              "more than 50,000 messages in one request"),
    # In the guide's state table (a duplicate: same text, same day, same header, same
    # number); taken as final wherever it is answered.
    "DOUBLE_SEND_ERROR": SendError(SendVerdict.NUMBER,
                                   "duplicate: same text, header and number today"),
}
"""Every word the guide lists as a send's refusal (HTTP 400, the word as the body)."""

IYS_SEND_ERRORS = frozenset({"MISSING_IYS_BRAND_CODE", "AHS_AUTHORIZATION_ERROR",
                             "NO_AHS_BRAND_ERROR", "COMMERCIAL_SENDING_ERROR_UNDER_150K",
                             "INVALID_IYS_RECIPIENT_TYPE"})
"""Send refusals for İYS: the message ends ``REJECTED`` with ``error_kind`` ``"iys"``."""

IP_NOT_ALLOWED_MARK = "IP"
"""An HTTP 401 whose text names the IP ("Hesabınızda izinli IP ayarları yapılmamış"):
the address is not allow-listed in Verimor's SMS settings; any other 401 is the
credentials ("Geçersiz kullanıcı adı/şifre")."""

REPORT_STATES: dict[str, str] = {
    "SENDING": "ENROUTE",  # being sent
    "WAITING": "ENROUTE",  # sent, waiting for the operator's answer
    "DELIVERED": "DELIVERED",
    "SENT": "DELIVERED",  # delivered, unconfirmed (option sent_final; else ENROUTE)
    "NOT_DELIVERED": "FAILED",  # usually the number is not active
    "EXPIRED": "EXPIRED",  # not delivered within the validity period
    "INVALID_DESTINATION_ADDRESS": "REJECTED",  # registered with no operator
    "REJECTED": "REJECTED",  # refused, usually by the operator's content check
    "DOUBLE_SEND_ERROR": "REJECTED",  # duplicate send blocked
    "BLACKLISTED_DESTINATION_ADDRESS": "REJECTED",  # in the account's blacklist
    "NOT_ALLOWED_BY_IYS": "REJECTED",  # no İYS consent
    "MISSING_TARIFF": "REJECTED",  # the recipient's operator has no tariff
    "ROUTE_NOT_AVAILABLE": "REJECTED",  # the account cannot send there
    "NETWORK_NOTCOVERED": "REJECTED",  # the account cannot send there
    "SEND_ERROR": "FAILED",  # an error while sending
    "INTERNATIONAL_DENIED": "REJECTED",  # international sending is off in the account
}
"""Every state the guide lists for a report or a status answer -> ours."""

PENDING_STATES = frozenset({"SENDING", "WAITING"})

IYS_STATES = frozenset({"NOT_ALLOWED_BY_IYS"})
"""Report states that are İYS's refusal (no consent in İYS)."""

GSM_ERRORS: dict[int, str] = {
    1: "EC_UNKNOWN_SUBSCRIBER",
    6: "EC_ABSENT_SUBSCRIBER_SM",
    11: "EC_TELESERVICE_NOT_PROVISIONED",
    13: "EC_CALL_BARRED",
    27: "EC_ABSENT_SUBSCRIBER",
    31: "EC_SUBSCRIBER_BUSY_FOR_MT_SMS",
    32: "EC_SM_DELIVERY_FAILURE",
    34: "EC_SYSTEM_FAILURE",
    256: "EC_SM_DF_MEMORYCAPACITYEXCEEDED",
    257: "EC_SM_DF_EQUIPMENTPROTOCOLERROR",
    258: "EC_SM_DF_EQUIPMENTNOTSM_EQUIPPED",
    500: "EC_PROVIDER_GENERAL_ERROR",
    502: "EC_NO_RESPONSE",
    1030: "EC_OR_POTENTIALVERSIONINCOMPATIBILITY",
    1155: "EC_NNR_SUBSYSTEMFAILURE",
    1157: "EC_NNR_MTPFAILURE",
    1281: "EC_UA_USERSPECIFICREASON",
    1536: "EC_PA_PROVIDERMALFUNCTION",
    2048: "EC_TIME_OUT",
    2049: "EC_IMSI_BLACKLISTED",
    2050: "EC_DEST_ADDRESS_BLACKLISTED",
    2051: "EC_INVALIDMSCADDRESS",
    2053: "EC_BLACKLISTED_SENDERADDRESS",
    4100: "EC_MESSAGE_CANCELED",
    4101: "EC_VALIDITYEXPIRED",
    4103: "EC_DESTINATION_FLOODING",
    4104: "EC_DESTINATION_TXT_FLOODING",
}
"""The operators' error codes a report's ``gsm_error`` may carry."""


def gsm_error_text(value: object) -> str | None:
    """A report's ``gsm_error`` as the error code kept with it: ``"27
    EC_ABSENT_SUBSCRIBER"``, the bare code when the guide does not name it, ``None``
    for ``"0"`` or nothing (no error)."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    if not text or text.strip("0") == "":
        return None
    name = GSM_ERRORS.get(int(text)) if text.isdigit() else None
    return f"{text} {name}" if name else text[:40]


# -- datacoding ("SMS GÖNDERİMİ (POST)", "SMS BOY KARAKTER LİMİTLERİ") ---------------------

DATACODING = {"GSM-7": "0", "GSM-7 Turkish": "1", "UCS-2": "2"}
"""``datacoding`` for each encoding the appliance decides at acceptance: 0 normal,
1 Turkish (the letters Ş ş Ğ ğ ç ı İ), 2 Unicode."""

COUNTING = Counting(tables=(TURKISH_LOCKING,), twice=frozenset("^{}\\[]~|€"),
                    whole_escapes=False)
"""How Verimor sends and counts ("SMS BOY KARAKTER LİMİTLERİ"). ``datacoding`` 1 is
one table, the Turkish locking shift: 155 characters in one part, 298 in two, 447 in
three (one shift element in the header), each Turkish letter one character, so the
letters are in the basic table; ``è ì Ø ø Æ æ ¡ ¿``, whose places that table takes,
cannot go with it (such a text goes as ``datacoding`` 2, UCS-2). Not-1: ``^ { } \\ [
] ~ | €`` count two characters with 0 or 1 (``€`` too, which the locking table holds
in one). Parts are the table's sizes (160/306/459..., 155/298/447..., 70/134/201...):
counted by size, so an escaped character may straddle a part boundary."""
