"""Structured logs: JSON lines by default, a human format on a terminal.

Fields passed with ``extra=`` land in the JSON object. Phone numbers are masked
by the callers (:func:`mask_msisdn`) unless ``log_full_numbers`` is set.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = f"{time.strftime('%H:%M:%S', time.localtime(record.created))} " \
               f"{record.levelname.lower():7} {record.getMessage()}"
        extras = {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}
        if extras:
            base += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            base += "\n" + self.formatException(record.exc_info)
        return base


def setup_logging(fmt: str = "auto", level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
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
