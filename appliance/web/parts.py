"""The running parts, as one typed and frozen set, and the web layer's one way to them.

The composition root (:func:`appliance.server.assemble`) builds every part eagerly
over the :class:`~appliance.runtime.Runtime` and returns a :class:`Parts`;
:func:`appliance.web.app.build_app` keeps it on the application, and every handler
reaches it through :func:`parts_of`. Loops are woken through the handles the parts
carry (``sender.wake``, ``campaigns.wake``, ``wake_imports``), never by a name; a
handler asks a part to do something (``webhooks.try_now()``), never sets its fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import Request

from appliance.imports.worker import ImportWorker
from appliance.key_quotas import KeyRates
from appliance.ops.observability.metrics import Metrics
from appliance.providers.registry import Providers
from appliance.reports.puller import Puller
from appliance.runtime import Runtime
from appliance.scheduler import Wake
from appliance.sending.expansion import CampaignExpander
from appliance.sending.sender import Sender
from appliance.smpp.lifecycle import SmppSessions
from appliance.web.body_budget import BodyBudget
from appliance.web.pages.sign_in_guard import SignInGuard
from appliance.webhooks.delivery import WebhookDelivery

if TYPE_CHECKING:  # imported by a server with an intake port only
    from appliance.web.intake_process import ReportIntake


@dataclass(frozen=True)
class Parts:
    """Every part of a serving process, built once, at the start."""

    runtime: Runtime
    providers: Providers
    sender: Sender
    campaigns: CampaignExpander
    import_worker: ImportWorker
    wake_imports: Wake
    sessions: SmppSessions  # the session-speaking providers' (none: no loop)
    webhooks: WebhookDelivery | None  # None: [webhooks] is not configured
    report_intake: ReportIntake | None  # None: no [reports] intake_port
    metrics: Metrics
    body_budget: BodyBudget
    sign_in_guard: SignInGuard
    puller: Puller  # asks providers about messages they have not reported (ROUTE-2)
    key_rates: KeyRates = field(default_factory=KeyRates)  # this process's, per API key


def parts_of(request: Request) -> Parts:
    """The parts of the process serving ``request``."""
    parts: Parts = request.app.state.parts
    return parts
