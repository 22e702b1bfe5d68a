"""Inbound (MO) messages in each HTTP provider's own webhook format (OPS-4).

One :class:`~appliance.providers.base.InboundReader` per kind, built over that kind's
report reader: the request is proven exactly as the provider's delivery reports are
(same signature, same shared secret, same URL forms), then read here. The appliance
receives them at ``/inbound/<provider>``; what each provider sends:

* **Vonage** (and the simulator): the inbound SMS webhook, a GET query, a form POST or a
  JSON POST as the account is set, with ``msisdn`` (the sender, international digits),
  ``to``, ``messageId``, ``text``, ``type`` (``text``, ``unicode``, ``binary``),
  ``keyword``, ``message-timestamp`` and, for a message sent in parts, ``concat=true``
  with ``concat-ref``, ``concat-total`` and ``concat-part``. Signed (``sig``) like the
  delivery receipts when ``signature_secret`` is set, else proven by ``api-key``. A
  binary message is stored with empty text (its ``data`` is in the raw request).
* **Twilio**: the incoming message webhook, a form POST (or GET) with ``From``, ``To``,
  ``Body``, ``MessageSid`` (or ``SmsSid``), signed with ``X-Twilio-Signature`` over the
  inbound URL. Twilio joins a message's segments before it calls. The answer is an empty
  TwiML ``<Response></Response>`` (no reply is sent to the sender).
* **Infobip**: the forwarded inbound messages, JSON ``{"results": [{"messageId", "from",
  "to", "text", "cleanText", "keyword", "receivedAt", ...}]}``, proven with the same
  shared ``secret`` as its reports (``?secret=`` in the URL or HTTP Basic).
* **http** (our own format): ``POST`` a JSON object ``{"id", "from", "to", "text",
  "received_at"?}`` or a list of them, signed ``X-Signature: sha256=<hex HMAC-SHA256 of
  the body, keyed with secret>`` exactly like its reports. ``id`` is the gateway's id
  for the message (a retry carries the same one); ``received_at`` ISO 8601.

Anything authentic that cannot be read is an :class:`InboundParseError`: kept raw, and
still answered ``2xx`` (the provider would only send it again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import InboundParseError

MAX_PARTS = 255  # a concatenated SMS has at most 255 parts (one octet in the UDH)


def text_field(obj: Mapping[str, Any], key: str, kind: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InboundParseError(f"{kind}: {key} is not text")
    return str(value)
