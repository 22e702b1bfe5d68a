"""``/healthz`` (the process answers), ``/readyz`` (it can do its job), ``/metrics``.

None needs a key: they are for the supervisor, the load balancer and Prometheus,
and tell nothing about any account's data.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.ops.observability.health import readiness
from appliance.web.parts import parts_of

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    parts = parts_of(request)
    checks = await readiness(parts.runtime, parts.providers)
    ready = all(c.ok or c.advisory for c in checks)
    return JSONResponse({
        "status": "ready" if ready else "not ready",
        "checks": {c.name: {"ok": c.ok, "detail": c.detail, **({"advisory": True}
                                                               if c.advisory else {})}
                   for c in checks},
        "reasons": [f"{c.name}: {c.detail}" for c in checks if not c.ok and not c.advisory],
    }, status_code=200 if ready else 503)


async def metrics(request: Request) -> Response:
    body = await parts_of(request).metrics.exposition()
    return Response(body, media_type=PROMETHEUS_TEXT)


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
