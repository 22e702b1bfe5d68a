"""An HTTP provider kind: its wire format and its report reader, from its settings.

A :class:`WireFormat` turns an :class:`~appliance.providers.outcome.OutgoingMessage`
into an ``httpx.Request`` and reads the answer into an
:class:`~appliance.providers.outcome.Outcome`. It never touches the database and never
sends anything itself: the transport owns the connection, so the transport decides what
a failure to send means (for HTTP,
:func:`~appliance.providers.http_transport.classify_transport_error`).

The HTTP kinds (:class:`ProviderAdapter` subclasses) are one class each that is both the
wire format and the report reader, since both speak the same provider's dialect and
share its settings and signatures.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar

import httpx

from appliance.clock import Clock
from appliance.config import ConfigError, Option, OptionValue, ProviderSettings, read_options

from .callbacks import ProviderPart, ReportReader
from .outcome import Outcome, OutgoingMessage, SubmitResult, short
from .wire_text import parse_retry_after


class WireFormat(ProviderPart, ABC):
    """An HTTP provider's submission format: the request for a message, and what its
    answer means. Pure: no connection, no database."""

    @abstractmethod
    def build_request(self, msg: OutgoingMessage) -> httpx.Request:
        """The provider's submit request for one message, against ``settings.base_url``."""

    @abstractmethod
    def interpret_response(self, response: httpx.Response) -> Outcome:
        """Read the provider's answer to a submission."""

    def http_outcome(self, response: httpx.Response, error_text: str) -> Outcome | None:
        """The verdict for a non-2xx answer, or ``None`` for a 2xx the adapter must read.

        429 (and 408, 425) -> RETRY honouring ``Retry-After``; 5xx -> RETRY except 504,
        where a gateway gave up waiting for a provider that may have taken the message
        (UNCERTAIN); other 4xx -> REJECTED; 301/307/308 (the API moved, typically an
        ``http://`` base URL: the request was not processed) -> RETRY; any other answer
        (302/303 may follow a processed POST) -> UNCERTAIN.
        """
        code = response.status_code
        if 200 <= code < 300:
            return None
        label = f"{self.kind} http {code}"
        detail = f"{label}: {error_text}" if error_text else label
        if code in (408, 425, 429):
            wait = parse_retry_after(response.headers.get("retry-after"), self.now_ms())
            return Outcome(SubmitResult.RETRY, retry_after_s=wait, error=short(detail))
        if code == 504:
            return Outcome(SubmitResult.UNCERTAIN, error=short(detail))
        if code >= 500:
            wait = parse_retry_after(response.headers.get("retry-after"), self.now_ms())
            return Outcome(SubmitResult.RETRY, retry_after_s=wait, error=short(detail))
        if 400 <= code < 500:
            return Outcome(SubmitResult.REJECTED, error=short(detail))
        if code in (301, 307, 308):
            where = response.headers.get("location", "")
            moved = f"{label}: moved to {where}" if where else label
            return Outcome(SubmitResult.RETRY, error=short(moved))
        return Outcome(SubmitResult.UNCERTAIN, error=short(detail))


class ProviderAdapter(WireFormat, ReportReader):
    """One HTTP provider kind: its wire format and its report reader, from its settings.

    Subclasses set ``kind``, ``OPTIONS`` (the keys of its table beyond the shared
    settings, credentials included, with their defaults: a default's type is the type),
    ``SECRET_OPTIONS`` (which of them are secret) and ``OPTION_CHOICES`` (the only
    values a text option may take), and implement the verbs. A key it does not declare,
    or a value of the wrong type, is a :class:`ConfigError` when the adapter is built;
    ``tolerated`` keys (the options of the other HTTP kinds: a table copied from one to
    another) are left out.
    """

    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {}
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset()
    OPTION_CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    reports_by_provider_id_only: ClassVar[bool] = False
    reports_per_part: ClassVar[bool] = False

    def __init__(
        self, settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None,
        tolerated: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._now_ms = now_ms or Clock.from_env().now_ms
        self._options = read_options(f"[providers.{self.name}] ", self.kind,
                                     self.declared_options(), settings.options, tolerated)
        self._check_settings()

    @classmethod
    def declared_options(cls) -> tuple[Option, ...]:
        """The kind's options as declarations (:class:`~appliance.config.Option`)."""
        return tuple(Option(name, default, secret=name in cls.SECRET_OPTIONS,
                            choices=cls.OPTION_CHOICES.get(name, ()))
                     for name, default in cls.OPTIONS.items())

    # -- configuration -----------------------------------------------------------------

    def _where(self, key: str) -> str:
        return f"[providers.{self.name}] {key}"

    def _check_settings(self) -> None:
        """Raise :class:`ConfigError` for a missing required setting. Extended per kind."""
        self._require("base_url")

    def config_problems(self, callback_url: str) -> list[str]:
        """What the provider would refuse in this configuration, found before anything is
        sent (MSG-7): one line each, naming the limit. ``callback_url`` is the URL the
        sender hands this provider. Kinds with limits extend it; by default none."""
        return []

    def _require(self, *keys: str) -> None:
        for key in keys:
            value = self._options[key] if key in self._options else getattr(self.settings, key)
            if not value:
                raise ConfigError(f"{self._where(key)}: required for kind {self.kind!r}")

    def option_bool(self, key: str) -> bool:
        return bool(self._options[key])

    def option_float(self, key: str) -> float:
        value = self._options[key]
        assert isinstance(value, float)
        return value

    def option_str(self, key: str) -> str:
        return str(self._options[key])

    def option_values(self) -> dict[str, OptionValue]:
        """Every declared option's value (given, else its default)."""
        return dict(self._options)

    @property
    def dedupes_on_ref(self) -> bool:
        """True only when the provider itself drops a second submission of our ref."""
        return self.settings.dedupes_on_ref

    def now_ms(self) -> int:
        return self._now_ms()

    def endpoint(self, path: str) -> httpx.URL:
        """``base_url`` + ``path``, parsed once per path (parsing a URL is a fifth of
        what building a request costs)."""
        known: dict[str, httpx.URL] = self.__dict__.setdefault("_endpoints", {})
        url = known.get(path)
        if url is None:
            url = known[path] = httpx.URL(self.settings.base_url.rstrip("/") + path)
        return url
