"""``X-Appliance-Signature``: ``sha256=`` and the hex HMAC-SHA256 of the raw body.

What is signed is exactly the bytes of the request body as sent (UTF-8 JSON), nothing
else: no header, no URL, no time. A receiver computes the HMAC over the body it read,
before parsing it, and compares in constant time (:func:`verify` is how).
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Appliance-Signature"
PREFIX = "sha256="


def sign(body: bytes, secret: str) -> str:
    """The header's value for ``body``."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, secret: str, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret``."""
    if not header:
        return False
    return hmac.compare_digest(sign(body, secret), header.strip())
