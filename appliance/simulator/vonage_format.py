"""What the simulated provider says, in Vonage's formats: submission answers, delivery
receipts and inbound messages, signed as Vonage signs its webhooks (the adapter's own
:func:`appliance.providers.vonage.vonage_signature`).

Pure functions of the simulator's :class:`~appliance.simulator.behaviour.Behaviour`
(credentials, signing), so the server (:mod:`appliance.simulator.server`) and the
receipt pushes (:mod:`appliance.simulator.receipts`) write the same fields.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

from starlette.responses import JSONResponse, Response

from appliance.providers.vonage import vonage_signature
from appliance.simulator.behaviour import Behaviour


def entry(to: str, ref: str, status: str, message_id: str = "",
          error: str = "") -> dict[str, str]:
    """One ``messages[]`` entry of Vonage's answer: one SMS part."""
    part: dict[str, str] = {"to": to, "status": status}
    if ref:
        part["client-ref"] = ref
    if status == "0":
        part.update({"message-id": message_id, "remaining-balance": "100.00000000",
                     "message-price": "0.03330000", "network": "28601"})
    else:
        part["error-text"] = error
    return part


def answer(to: str, ref: str, status: str, message_id: str = "",
           error: str = "") -> Response:
    """A one-part answer (a refusal, or a scripted status)."""
    return JSONResponse({"message-count": "1",
                         "messages": [entry(to, ref, status, message_id, error)]})


def receipt_params(b: Behaviour, to: str, ref: str, message_id: str, status: str,
                   at_s: float) -> dict[str, str]:
    """One delivery receipt (for one part) as Vonage's receipt webhook sends it."""
    when = datetime.fromtimestamp(at_s, tz=UTC)
    params = {
        "msisdn": to,
        "to": "APPLIANCE",
        "network-code": "28601",
        "messageId": message_id,
        "price": "0.03330000",
        "status": status,
        "scts": when.strftime("%y%m%d%H%M"),
        "err-code": "0" if status in ("delivered", "accepted", "buffered") else "1",
        "api-key": b.api_key,
        "client-ref": ref,
        "message-timestamp": when.strftime("%Y-%m-%d %H:%M:%S"),
        "timestamp": str(int(time.time())),
        "nonce": secrets.token_hex(16),
    }
    if b.signature_secret:
        params["sig"] = vonage_signature(params, b.signature_secret, b.signature_method)
    return params


def inbound_params(b: Behaviour, sender: str, to: str, text: str, message_id: str,
                   concat: tuple[str, int, int] | None = None) -> dict[str, str]:
    """One inbound SMS (or one part of one) as Vonage's inbound webhook sends it."""
    now = datetime.now(tz=UTC)
    words = text.split()
    params = {
        "msisdn": sender.removeprefix("+"),
        "to": to,
        "messageId": message_id,
        "text": text,
        "type": "text" if text.isascii() else "unicode",
        "keyword": words[0].upper() if words else "",
        "api-key": b.api_key,
        "message-timestamp": now.strftime("%Y-%m-%d %H:%M:%S"),
        "timestamp": str(int(now.timestamp())),
        "nonce": secrets.token_hex(16),
    }
    if concat is not None:
        ref, part, total = concat
        params.update({"concat": "true", "concat-ref": ref, "concat-part": str(part),
                       "concat-total": str(total)})
    if b.signature_secret:
        params["sig"] = vonage_signature(params, b.signature_secret, b.signature_method)
    return params
