"""Two providers behind one route, for the routes and failover tests (ROUTE-3)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from tests.sending.support import message


def route_config(
    path: Path,
    a_url: str,
    b_url: str,
    *,
    sending: str = "",
    a_extra: str = "",
    concurrency: int = 4,
    rate_per_s: float = 200,
    failover_after: int = 3,
) -> Path:
    """Providers ``a`` and ``b`` (both of the simulator kind) and one route, ``+90`` to
    ``a`` then ``b``; ``a`` fails over after ``failover_after`` unreached tries."""
    path.write_text(f"""
[sending]
submit_timeout_s = 2.5
{sending}

[providers.a]
kind = "simulator"
base_url = "{a_url}"
rate_per_s = {rate_per_s}
concurrency = {concurrency}
failover_after = {failover_after}
{a_extra}

[providers.b]
kind = "simulator"
base_url = "{b_url}"
rate_per_s = {rate_per_s}
concurrency = {concurrency}

[[routes]]
prefix = "+90"
providers = ["a", "b"]
""")
    return path


def send(api: httpx.Client, to: str, provider: str | None = None, body: str = "hello") -> str:
    data: dict[str, Any] = {"to": to, "body": body}
    if provider is not None:
        data["provider"] = provider
    r = api.post("/api/messages", json=data)
    assert r.status_code == 202, r.text
    ref: str = r.json()["ref"]
    return ref


def tries(api: httpx.Client, ref: str) -> list[tuple[str, str]]:
    """``(provider, outcome)`` of each entry of the message's ``attempts_by_provider``."""
    return [(a["provider"], a["outcome"]) for a in message(api, ref)["attempts_by_provider"]]


def tried_after(api: httpx.Client, ref: str, provider: str, at: str) -> bool:
    """Whether the message has an ``unreached`` try at ``provider`` later than ``at`` (an
    ISO time as the API writes it; a try made while the provider was already failing, when
    ``at`` is a move's)."""
    return any(
        a["provider"] == provider and a["outcome"] == "unreached" and a["at"] > at
        for a in message(api, ref)["attempts_by_provider"]
    )


def first_move(api: httpx.Client, refs: list[str]) -> str:
    """When the first of the messages was moved on (its first ``failed_over`` entry)."""
    return str(min(
        a["at"]
        for ref in refs
        for a in message(api, ref)["attempts_by_provider"]
        if a["outcome"] == "failed_over"
    ))


def metric_values(api: httpx.Client, name: str) -> dict[str, float]:
    """Every sample of ``name`` in ``/metrics``, by its labels as written."""
    out: dict[str, float] = {}
    for line in api.get("/metrics").text.splitlines():
        m = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def failovers(api: httpx.Client, source: str, target: str, reason: str) -> float:
    for labels, value in metric_values(api, "appliance_route_failovers_total").items():
        if all(f'{k}="{v}"' in labels
               for k, v in (("from", source), ("to", target), ("reason", reason))):
            return value
    return 0.0
