"""Structured logs: JSON lines by default, a human format on a terminal.

Fields passed with ``extra=`` land in the JSON object, and every line logged while
an HTTP request is handled carries its ``request_id`` (``X-Request-Id``, see
:mod:`appliance.ops.request_middleware`).

Logs never carry a full phone number or a configured secret unless asked:
callers mask numbers with :func:`mask_msisdn`, and a last filter masks anything
shaped like an E.164 number (``+`` and 7 to 15 digits) and the values of the
configured secrets (provider keys, tokens) in every line, unless
``log_full_numbers`` is set (secrets are masked always).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message", "asctime", "color_message"}
_E164 = re.compile(r"\+\d{7,15}\b")

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "request_id", default=None)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = f"{time.strftime('%H:%M:%S', time.localtime(record.created))} " \
               f"{record.levelname.lower():7} {record.getMessage()}"
        extras = _extras(record)
        if extras:
            base += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            base += "\n" + self.formatException(record.exc_info)
        return base


class ContextFilter(logging.Filter):
    """Adds the current request id to every record logged inside a request."""

    def filter(self, record: logging.LogRecord) -> bool:
        rid = request_id.get()
        if rid is not None and not hasattr(record, "request_id"):
            record.request_id = rid
        return True


class RedactingFormatter(logging.Formatter):
    """Wraps a formatter; masks numbers and secrets in the finished line."""

    def __init__(self, inner: logging.Formatter, full_numbers: bool,
                 secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        self.full_numbers = full_numbers
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        for secret in self.secrets:
            line = line.replace(secret, "***")
        if not self.full_numbers:
            line = _E164.sub(lambda m: mask_msisdn(m.group(0)), line)
        return line


def setup_logging(fmt: str = "auto", level: str = "info", full_numbers: bool = False,
                  secrets: Iterable[str] = ()) -> None:
    handler = logging.StreamHandler(sys.stderr)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    inner: logging.Formatter = JsonFormatter() if use_json else TextFormatter()
    handler.setFormatter(RedactingFormatter(inner, full_numbers, secrets))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def mask_msisdn(msisdn: str, full: bool = False) -> str:
    """``+90532*****67``: enough to recognise, not enough to dial."""
    if full or len(msisdn) < 7:
        return msisdn
    return msisdn[:6] + "*" * (len(msisdn) - 8) + msisdn[-2:]
