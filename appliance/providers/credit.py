"""Asking a provider how much credit its account has left, where its API tells it.

A kind whose API has a balance query gives its adapter the :class:`CreditQuery` verbs;
like a wire format they do no I/O. The credit loop (:mod:`appliance.sending.credit`)
carries the request over the provider's transport out of its ``requests_per_s``, shows
the figure as ``appliance_provider_credit{provider}`` and on the dashboard, and asks
again every minute while the lane is held for ``no_credit``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import httpx

from .callbacks import ProviderPart


class CreditQuery(ProviderPart, ABC):
    """A provider that says how much credit its account has left."""

    @abstractmethod
    def build_credit_request(self) -> httpx.Request:
        """The balance request, against ``settings.base_url``."""

    @abstractmethod
    def _read_credit(self, body: bytes, content_type: str) -> float:
        """Kind-specific reading; may raise anything, the caller wraps it."""

    def read_credit(self, status_code: int, body: bytes, content_type: str) -> float | None:
        """The credit the answer states (in the provider's unit: credits or currency,
        as ``docs/providers.md`` says per kind), or ``None`` when it cannot be read.
        Never raises."""
        if not 200 <= status_code < 300:
            return None
        try:
            return float(self._read_credit(body, content_type))
        except Exception:
            return None


def credit_query_of(part: object) -> CreditQuery | None:
    """``part`` as a :class:`CreditQuery`, or ``None`` when its kind has no balance API."""
    return part if isinstance(part, CreditQuery) else None
