"""``/callbacks/{provider}`` on the server's own port: delivery reports, stored first,
interpreted after (DLR-2).

The endpoint (:class:`appliance.web.callback_endpoint.CallbackEndpoint`, taken ahead of
the Starlette app by :class:`~appliance.web.callback_endpoint.CallbackLane`) reads the
body under ``[reports] max_callback_bytes``, lets the provider's adapter prove the
callback is the provider's (``401`` and nothing stored when it is not) and reads the
reports in it; :func:`own_port` gives it the store of this port: the callback queued
for the writer with those that came beside it
(:class:`appliance.web.callback_store.CallbacksTogether`), stored raw and then its
reports filed and applied, and for a kind that pushes inbound messages to the same URL
(its inbound reader is ``at_report_url``: Verimor), those filed as ``/inbound`` files
them. It answers the adapter's ``2xx`` once committed, whether or not anything
matched, and for a body it cannot parse (kept raw, ``parsed = 0``; so is one whose
reports hold text that is not valid Unicode). The one failure it reports is failing
to store: ``503`` with ``Retry-After``, so the provider sends it again. Refusals are
JSON ``{"error", "message"}``. Callbacks are never refused for the ``[storage]``
reserve: it is kept for them.

The route below stays in the router so that other methods are answered ``405`` as on
every route; ``GET``, ``HEAD`` and ``POST`` never reach it past the lane.
"""

from __future__ import annotations

import logging

from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from appliance.disk import is_storage_error
from appliance.logs import note_not_stored
from appliance.ops.observability.request_middleware import observe_request
from appliance.web.callback_check import Checked, note_receipt
from appliance.web.callback_endpoint import ROUTE, CallbackEndpoint
from appliance.web.callback_store import CallbacksTogether
from appliance.web.parts import Parts

log = logging.getLogger("appliance.callbacks")
METHODS = ("GET", "HEAD", "POST")  # the route's: Starlette's GET takes HEAD too


def own_port(parts: Parts) -> CallbackEndpoint:
    """The endpoint of the server's own port, storing through this process's writer."""
    runtime, metrics = parts.runtime, parts.metrics
    settings = runtime.settings
    together = CallbacksTogether(runtime.store.writer, settings, runtime.now_ms)

    async def store(checked: Checked) -> bool:
        if checked.signed_age_s is not None:
            metrics.observe_signed_report_age(checked.provider, checked.signed_age_s)
        try:
            receipt = await together.store(checked)
        except Exception as exc:
            if not is_storage_error(exc):
                log.exception("callback for provider %s could not be stored",
                              checked.provider)
            else:  # a full disk refuses every callback: summed up, not one line each
                note_not_stored(ROUTE, exc)
            return False
        if receipt is None:  # it failed alone, undone (logged where it failed)
            return False
        note_receipt(checked.provider, receipt)
        return True

    def observe(method: str, status: int, seconds: float) -> None:
        observe_request(metrics, ROUTE, method, status, seconds)

    return CallbackEndpoint(parts.providers, parts.body_budget,
                            settings.reports.max_callback_bytes, settings.callback_base,
                            store, observe, methods=METHODS)


class _ThroughTheApp:
    """The route's endpoint, for a request that did reach the router: the same
    endpoint the lane has (kept on the app's state)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: CallbackEndpoint = scope["app"].state.callbacks
        await endpoint(scope, receive, send)


def routes() -> list[BaseRoute]:
    return [Route(ROUTE, _ThroughTheApp(), methods=["GET", "POST"])]
