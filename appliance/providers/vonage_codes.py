"""Vonage's SMS API tables and its webhook signature, as Vonage publishes them (the
kind itself is :mod:`.vonage`): the submit statuses of the SMS API error table
(https://developer.vonage.com/api-errors/sms), which of them are worth another try and
which mean "this route cannot", the delivery receipt's status words, and the signed
webhooks' signature. Data and a pure function: no I/O."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

SIGNATURE_METHODS = ("md5hash", "md5", "sha1", "sha256", "sha512")

def vonage_signature(params: Mapping[str, str], secret: str, method: str) -> str:
    """Vonage's signature over ``params`` (``sig`` ignored), as lower-case hex."""
    signed = "".join([
        f"&{key}={value.replace('&', '_').replace('=', '_')}"
        for key, value in sorted(params.items())
        if key != "sig"
    ])
    if method == "md5hash":
        return hashlib.md5((signed + secret).encode("utf-8")).hexdigest()
    if method not in SIGNATURE_METHODS:
        raise ValueError(f"unknown signature method {method!r}")
    return hmac.new(secret.encode("utf-8"), signed.encode("utf-8"), method).hexdigest()


# Submit statuses, from Vonage's SMS API error table.
SUBMIT_STATUS_TEXT = {
    "0": "Success",
    "1": "Throttled",
    "2": "Missing Parameters",
    "3": "Invalid Parameters",
    "4": "Invalid Credentials",
    "5": "Internal Error",
    "6": "Invalid Message",
    "7": "Number Barred",
    "8": "Partner Account Barred",
    "9": "Partner Quota Violation",
    "10": "Too Many Existing Binds",
    "11": "Account Not Enabled For HTTP",
    "12": "Message Too Long",
    "14": "Invalid Signature",
    "15": "Invalid Sender Address",
    "22": "Invalid Network Code",
    "23": "Invalid Callback Url",
    "29": "Non-Whitelisted Destination",
    "32": "Signature And API Secret Disallowed",
    "33": "Number De-activated",
}
# Not taken, try again later (seconds to wait, None = the sender's own backoff):
# 1 throttled (per-second account limit), 5 internal error, 10 too many binds ("back off
# and retry"), 9 out of credit ("top up and retry": the operator's move, then it flows).
TRANSIENT_SUBMIT_STATUS: dict[str, float | None] = {"1": 1.0, "5": None, "9": 60.0, "10": 5.0}
# "This route cannot" (ROUTE-3), from the same table
# (https://developer.vonage.com/api-errors/sms): 6 Invalid Message ("unable to process
# this message, for example, an un-recognized number prefix") and 22 Invalid Network Code
# (the network "not recognized, or does not match the country of the destination
# address"): the destination is not served this way, another provider may serve it.
ROUTE_REFUSALS = frozenset({"6", "22"})

# Delivery receipt status words -> our state.
DLR_STATES = {
    "delivered": "DELIVERED",
    "expired": "EXPIRED",
    "failed": "FAILED",
    "rejected": "REJECTED",
    "accepted": "ACCEPTED",
    "buffered": "ENROUTE",
    # "unknown": the carrier sent a state nobody recognises; a later receipt or our own
    # cut-off settles the message. "deleted": moved to another gateway, still in play.
    "unknown": "ENROUTE",
    "deleted": "ENROUTE",
}
