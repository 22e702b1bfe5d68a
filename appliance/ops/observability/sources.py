"""What the metrics and the readiness checks read from the running parts.

The domain parts (the sender's lanes, the import worker's rate, the providers and
their sessions) are named by their types. The edge's figures belong to the web layer, above this one
(the body budget, the edge's counters, the report intake's process): they are read
through the small protocols here, so nothing in operations imports the web layer.
The composition root (:func:`appliance.server.assemble`) fills :class:`Sources`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from appliance.imports.worker import ImportWorker
from appliance.providers.registry import Providers
from appliance.reports.puller import Puller
from appliance.sending.sender import Sender


class EdgeFigures(Protocol):
    """Open connections and what the edge refused, by reason."""

    @property
    def open_connections(self) -> int: ...

    @property
    def refused(self) -> Counter[str]: ...


class BodyFigures(Protocol):
    """Bytes of request bodies held now, and the requests the budget refused."""

    @property
    def held(self) -> int: ...

    @property
    def refused(self) -> int: ...


class IntakeEdgeFigures(EdgeFigures, Protocol):
    """The report intake's process: its edge and its body budget."""

    @property
    def body_bytes_held(self) -> int: ...

    @property
    def budget_refused(self) -> int: ...


class IntakeFigures(Protocol):
    """The report intake's process (``[reports] intake_port``)."""

    @property
    def up(self) -> bool: ...

    @property
    def restarts(self) -> int: ...

    @property
    def edge(self) -> IntakeEdgeFigures: ...


@dataclass(frozen=True)
class Sources:
    """The running parts the collector reads at scrape time."""

    sender: Sender
    import_worker: ImportWorker
    providers: Providers  # their sessions, whatever protocol they speak
    edge: EdgeFigures
    body_budget: BodyFigures
    report_intake: IntakeFigures | None
    puller: Puller | None = None  # its counts of messages asked about (ROUTE-2)
