"""Validity (ROUTE-4) on the wire: each HTTP kind's own field, its unit and its range.

The sender gives a message's validity as whole seconds left (``OutgoingMessage.validity_s``,
already within the kind's range; ``None``: no field, the provider's own default). Each
kind declares its range (``ProviderKind.validity_range_s``), which a request's
``validity_s`` is checked against at acceptance. The references:

- Vonage (and the built-in simulator, which speaks its wire): ``ttl`` on ``POST
  /sms/json``, "the duration in milliseconds the delivery of an SMS will be attempted",
  20000 to 604800000 (Vonage SMS API reference; 72 hours when absent).
- Twilio: ``ValidityPeriod`` in seconds, 1 to 36,000 (:mod:`.twilio`).
- Infobip: ``validityPeriod`` of a message of ``/sms/2/text/advanced``, "the message
  validity period in minutes ... longer than 48h is not supported"
  (``SmsTextualMessage`` of Infobip's own client, ``infobip/infobip-api-java-client``).
- Verimor: ``valid_for``, "SS:DD (veya S:DD)", hours and minutes, from 00:01 to 48:00
  (24:00 when absent; the guide's "SMS GÖNDERİMİ", ``verimor/SMS-API``), ``INVALID_PERIOD``
  otherwise (:mod:`.verimor_codes`).
- SMPP: ``validity_period`` in the relative time format (:mod:`appliance.smpp.submission`).

A kind whose unit is coarser than a second rounds what is left up (a provider that
gives up a little after us does no harm: the sender never submits past the validity).
"""

from __future__ import annotations

from .outcome import OutgoingMessage

TTL_RANGE_S = (20, 604_800)  # Vonage's ttl, in seconds
MINUTES_48H_S = (60, 48 * 3_600)  # Infobip's validityPeriod and Verimor's valid_for


def vonage_ttl(msg: OutgoingMessage) -> dict[str, str]:
    """Vonage's ``ttl`` (milliseconds) for ``msg``; empty without a validity."""
    return {} if msg.validity_s is None else {"ttl": str(msg.validity_s * 1000)}


def minutes(seconds: int) -> int:
    """Whole minutes, rounded up."""
    return -(-seconds // 60)


def hours_minutes(seconds: int) -> str:
    """Verimor's ``valid_for``: ``"HH:MM"``, rounded up to the minute."""
    total = minutes(seconds)
    return f"{total // 60:02d}:{total % 60:02d}"
