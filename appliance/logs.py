"""Structured logs: JSON lines by default, a human format on a terminal.

Fields passed with ``extra=`` land in the JSON object, and every line logged while
an HTTP request is handled carries its ``request_id`` (``X-Request-Id``, see
:mod:`appliance.ops.observability.request_middleware`).

A line that can come thousands of times a minute (``unknown report``, one per
report left waiting; ``not stored``, one per request refused on a full disk) goes
through :class:`SampledLine`: the first of each interval is logged in full, the
others are counted into one summary line per interval.

Logs never carry a full phone number or a configured secret unless asked:
callers mask numbers with :func:`mask_msisdn`, and a last filter masks anything
shaped like an E.164 number (``+`` and 7 to 15 digits) and the values of the
configured secrets (provider keys, tokens) in every line, unless
``log_full_numbers`` is set (secrets are masked always).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
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
                  secrets: Iterable[str] = (), path: Path | None = None) -> None:
    """Log to stderr, or (``path``) append to that file; ``auto`` is JSON unless the
    lines go to a terminal."""
    handler: logging.Handler
    if path is None:
        handler = logging.StreamHandler(sys.stderr)
        use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    else:
        handler = logging.FileHandler(path, encoding="utf-8")
        use_json = fmt != "text"
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


@dataclass
class _Interval:
    started: float
    fields: dict[str, Any]
    count: int = 0  # occurrences after the first, not logged one by one
    sample: list[object] = field(default_factory=list)


class SampledLine:
    """One line (INFO unless ``level`` says otherwise) that may repeat thousands of
    times a minute, per group (e.g. per provider, per route): the first occurrence of
    each ``interval_s`` is logged in full (with ``"count": 1``); the others are logged
    at DEBUG only, counted, and summed up in one line at ``level`` when the interval
    ends (``"count": N`` with a ``"sample"`` of their details). Adding up ``count``
    over the lines gives every occurrence."""

    def __init__(self, logger: logging.Logger, message: str, interval_s: float = 10.0,
                 sample: int = 5, detail_key: str = "detail",
                 clock: Callable[[], float] = time.monotonic,
                 level: int = logging.INFO) -> None:
        self.logger = logger
        self.level = level
        self.message = message
        self.detail_key = detail_key
        self.interval_s = interval_s
        self.sample = sample
        self.clock = clock
        self._open: dict[str, _Interval] = {}

    def note(self, group: str, detail: object, **fields: Any) -> None:
        """One occurrence; ``detail`` (a ref) is logged in full or kept as a sample."""
        now = self.clock()
        current = self._open.get(group)
        if current is not None and now - current.started >= self.interval_s:
            self.flush(group)  # no event loop timer ran (or it is late): close it now
            current = None
        if current is None:
            self._open[group] = _Interval(now, fields)
            self.logger.log(self.level, self.message,
                            extra={**fields, "count": 1, self.detail_key: detail})
            self._flush_later(group)
            return
        current.count += 1
        if len(current.sample) < self.sample:
            current.sample.append(detail)
        self.logger.debug(self.message, extra={**fields, "count": 1, self.detail_key: detail})

    def flush(self, group: str | None = None) -> None:
        """Log the summary of the open interval of ``group`` (of every group: None)."""
        for name in [group] if group is not None else list(self._open):
            current = self._open.pop(name, None) if name is not None else None
            if current is not None and current.count:
                self.logger.log(self.level, self.message, extra={
                    **current.fields, "count": current.count, "sample": current.sample,
                    "interval_s": self.interval_s, "summary": True})

    def _flush_later(self, group: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # flushed by the next occurrence after the interval instead
        # A fresh context: the summary belongs to no one request.
        loop.call_later(self.interval_s, self._close_if_due, group,
                        context=contextvars.Context())

    def _close_if_due(self, group: str) -> None:
        current = self._open.get(group)
        if current is not None and self.clock() - current.started >= self.interval_s * 0.99:
            self.flush(group)


_SAMPLED: dict[tuple[str, str], SampledLine] = {}


def sampled_line(logger: logging.Logger, message: str, *, level: int,
                 detail_key: str = "error") -> SampledLine:
    """The one :class:`SampledLine` (10 s intervals) for ``message`` on ``logger``.

    For the lines a full disk repeats (every write refused, every commit failed, every
    step of a loop that writes failed): one each per 10 s, the rest counted."""
    key = (logger.name, message)
    line = _SAMPLED.get(key)
    if line is None:
        line = _SAMPLED[key] = SampledLine(logger, message, 10.0, detail_key=detail_key,
                                           level=level)
    return line


# A request refused because the store could not write (``503 not_stored``): on a full
# disk every write request is one, so they are summed up per route every 10 s rather
# than logged one by one (a traceback each was thousands of lines a minute).
NOT_STORED = sampled_line(logging.getLogger("appliance.http"), "not stored",
                          level=logging.ERROR)


def note_not_stored(route: str, exc: BaseException) -> None:
    """One request refused because its write unit failed for want of storage."""
    NOT_STORED.note(route, f"{type(exc).__name__}: {exc}", route=route)
