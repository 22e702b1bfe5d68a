"""Where a report's CPU goes: the callback path layer by layer, in-process.

The ASGI apps are called directly (no sockets), 32 requests at a time, with the real
writer on a real file (``synchronous=FULL``); each figure is ``process_time`` per
report over ``--reports`` signed ``http``-kind reports, median of 3. Layers:

- a bare Starlette route reading the body (the baseline);
- the same route behind the appliance's two middlewares (request id and metrics,
  last resort), then among all the appliance's routes;
- the appliance's ``/callbacks/gw`` (the plain ASGI endpoint ahead of the Starlette
  app, storing through the writer with the callbacks beside it), and the same with the
  write (queue, unit, writer, commit) taken out;
- the pieces alone: signature, parsing, the write unit on a connection (no writer
  thread), a no-op unit through the writer (the hand-back).

HTTP itself (uvicorn's protocol and the sockets) is what ``bench_callbacks_wrk.py``
adds on top. ``--kind vonage``: a ``vonage`` provider and signed Vonage receipts
(``bench_pg_scaling.signed_receipt``), and the checks measured as the route runs them
(``callback_check.check``: signature, reports, signed age). Run:
``.venv/bin/python bench/bench_intake_cost.py``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
from starlette.routing import BaseRoute, Route  # noqa: E402

from appliance.logs import setup_logging  # noqa: E402
from appliance.ops.observability.metrics import Metrics  # noqa: E402
from appliance.ops.observability.request_middleware import RequestMiddleware  # noqa: E402
from appliance.provider_kinds import load_settings  # noqa: E402
from appliance.providers import CallbackRequest  # noqa: E402
from appliance.providers.http_json import body_signature  # noqa: E402
from appliance.reports.apply import Receipt, receive  # noqa: E402
from appliance.reports.inbox import RawCallback, from_parsed  # noqa: E402
from appliance.runtime import Runtime  # noqa: E402
from appliance.server import assemble  # noqa: E402
from appliance.store.schema import open_connection  # noqa: E402
from appliance.web.app import all_routes, build_app  # noqa: E402
from appliance.web.body_budget import BodyBudget  # noqa: E402
from appliance.web.callback_check import check, note_receipt  # noqa: E402
from appliance.web.last_resort import LastResort  # noqa: E402

SECRET = "bench-secret"
ASGI = Callable[[Any, Any, Any], Awaitable[None]]
_serial = iter(range(10**9))


KIND = {"kind": "http"}  # --kind


def signed() -> tuple[bytes, str]:
    if KIND["kind"] == "vonage":
        from bench.bench_pg_scaling import signed_receipt

        return signed_receipt(f"X{next(_serial):09d}", int(time.time())).encode(), ""
    body = json.dumps({"ref": f"X{next(_serial):09d}", "status": "delivered",
                       "reported_at": "2026-01-01T00:00:00Z"}).encode()
    return body, body_signature(body, SECRET)


def call(body: bytes, sig: str) -> tuple[dict[str, Any], Any, Any, list[Any]]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/callbacks/gw",
             "raw_path": b"/callbacks/gw", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
                         (b"x-signature", sig.encode()),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 8080), "state": {}}
    sent: list[Any] = []

    async def receive_() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    return scope, receive_, send, sent


async def per_report(app: ASGI, n: int) -> float:
    requests = [signed() for _ in range(n)]
    cpu = time.process_time()
    for start in range(0, n, 32):
        calls = [call(b, s) for b, s in requests[start:start + 32]]
        await asyncio.gather(*(app(scope, r, s) for scope, r, s, _ in calls))
        for *_, sent in calls:
            assert sent[0]["status"] == 200, sent
    return (time.process_time() - cpu) / n * 1e6


async def median_of_3(app: ASGI, n: int) -> float:
    await per_report(app, 300)
    return statistics.median([await per_report(app, n) for _ in range(3)])


async def bare_handler(request: Request) -> Response:
    await request.body()
    return Response(b"", status_code=200)


def starlette(routes: list[BaseRoute], metrics: Metrics | None) -> Starlette:
    middleware = [] if metrics is None else [
        Middleware(RequestMiddleware, metrics=metrics),
        Middleware(LastResort, budget=BodyBudget(1 << 30))]
    return Starlette(routes=routes, middleware=middleware)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=4000)
    ap.add_argument("--kind", choices=("http", "vonage"), default="http")
    args = ap.parse_args()
    KIND["kind"] = args.kind
    tmp = Path(tempfile.mkdtemp())
    (tmp / "data").mkdir()
    config = tmp / "appliance.toml"
    if args.kind == "vonage":
        from bench.bench_pg_scaling import API_KEY, METHOD
        from bench.bench_pg_scaling import SECRET as VONAGE_SECRET

        config.write_text('[providers.gw]\nkind = "vonage"\nbase_url = "http://127.0.0.1:9"\n'
                          f'api_key = "{API_KEY}"\napi_secret = "unused"\n'
                          f'signature_secret = "{VONAGE_SECRET}"\n'
                          f'signature_method = "{METHOD}"\n')
    else:
        config.write_text('[providers.gw]\nkind = "http"\nbase_url = "http://127.0.0.1:9"\n'
                          f'secret = "{SECRET}"\n')
    settings = load_settings(config, env={}, overrides={"data_dir": str(tmp / "data")})
    setup_logging("json", "info", False, [], path=tmp / "log.txt")
    appliance = Runtime(settings).open()
    parts = assemble(appliance)
    app = build_app(parts)
    n = args.reports
    results: dict[str, float] = {}

    async def run() -> None:
        await appliance.start()
        route = Route("/callbacks/{provider}", bare_handler, methods=["GET", "POST"])
        results["bare Starlette route reading the body"] = await median_of_3(
            starlette([route], None), n)
        results["+ request id, metrics, last resort"] = await median_of_3(
            starlette([route], parts.metrics), n)
        results["+ every route of the appliance"] = await median_of_3(
            starlette([route, *all_routes()[1:]], parts.metrics), n)
        results["the appliance's /callbacks/gw"] = await median_of_3(app, n)
        writer = appliance.store.writer
        endpoint = app.endpoint  # type: ignore[attr-defined]  # the lane's
        real = endpoint.store

        async def no_write(checked: Any) -> bool:  # as the own port's store answers
            note_receipt(checked.provider, Receipt(1, filed=1, waiting=["X"]))
            return True

        endpoint.store = no_write
        results["the same without the write (unit, writer, commit)"] = await median_of_3(app, n)
        endpoint.store = real
        cpu = time.process_time()
        for _ in range(n // 32):
            await asyncio.gather(*(writer.run(lambda c: None) for _ in range(32)))
        results["a no-op unit through the writer (hand-back, 32 at once)"] = (
            (time.process_time() - cpu) / (n // 32 * 32) * 1e6)
        await appliance.stop()

    uvloop.run(run())
    provider = parts.providers.get("gw")
    assert provider is not None and provider.reports is not None
    adapter = provider.reports
    reqs = []
    for _ in range(n):
        body, sig = signed()
        reqs.append(CallbackRequest(method="POST", url="http://x/callbacks/gw", query="",
                                    headers={"x-signature": sig,
                                             "content-type": "application/json"},
                                    body=body))
    cpu = time.process_time()
    for r in reqs:
        check(adapter, "gw", r.method, r.url, "", r.headers, r.body)
    results["the checks as the route runs them (callback_check.check)"] = (
        (time.process_time() - cpu) / n * 1e6)
    reqs = [CallbackRequest(r.method, r.url, r.query, r.headers, r.body) for r in reqs]
    cpu = time.process_time()
    for r in reqs:
        adapter.verify(r)
    results["signature (HMAC-SHA256), alone"] = (time.process_time() - cpu) / n * 1e6
    cpu = time.process_time()
    parsed = [[from_parsed("gw", p) for p in adapter.parse_reports(r)] for r in reqs]
    results["reports, alone (after the signature)"] = (time.process_time() - cpu) / n * 1e6
    conn = open_connection(str(settings.db_path))
    raws = [RawCallback("gw", "POST", "application/json", "", r.body) for r in reqs]
    cpu = time.process_time()
    for start in range(0, n, 32):
        conn.execute("BEGIN IMMEDIATE")
        for i in range(start, min(n, start + 32)):
            conn.execute("SAVEPOINT unit")
            receive(conn, raws[i], parsed[i], None, 1)
            conn.execute("RELEASE unit")
        conn.execute("ROLLBACK")
    results["the write unit on a connection (no commit)"] = (time.process_time() - cpu) / n * 1e6
    conn.close()
    appliance.close()
    print(f"CPU per report, in-process, {n:,} reports, median of 3")
    for name, us in results.items():
        print(f"{name:60s} {us:7.1f} us")


if __name__ == "__main__":
    main()
