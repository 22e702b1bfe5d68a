"""``GET /api/openapi.json`` (TEAM-4): served without a key, valid OpenAPI 3.1, and it
lists every ``/api/*`` route the app has and every route and field ``docs/api.md``
documents. The API tests' JSON answers are checked against it as they arrive
(:func:`tests.harness.openapi_check`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from openapi_spec_validator import validate
from starlette.routing import Route

from appliance.web.app import all_routes
from appliance.web.openapi import document
from tests.harness import ROOT, Server

API_MD = ROOT / "docs" / "api.md"


def app_routes() -> set[tuple[str, str]]:
    return {(m, r.path) for r in all_routes() if isinstance(r, Route)
            and r.path.startswith("/api/") for m in (r.methods or ()) if m != "HEAD"}


def described() -> set[tuple[str, str]]:
    return {(m.upper(), path) for path, ops in document()["paths"].items() for m in ops}


def test_every_api_route_of_the_app_is_described_and_nothing_else() -> None:
    assert app_routes() - described() == set(), "routes missing from appliance/web/openapi.py"
    assert described() - app_routes() == set()


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def names_in(schema: Any) -> set[str]:
    """Every property name and enum value anywhere in ``schema``."""
    found: set[str] = set()
    if isinstance(schema, dict):
        found |= set(schema.get("properties", {}))
        found |= {str(v) for v in [*schema.get("enum", []), *schema.get("examples", [])]}
        for v in schema.values():
            found |= names_in(v)
    elif isinstance(schema, list):
        for v in schema:
            found |= names_in(v)
    return found


def documented_rows() -> list[tuple[list[tuple[str, str]], set[str]]]:
    """docs/api.md's HTTP table: each row's routes (method, path) and quoted fields."""
    rows = []
    for line in API_MD.read_text().splitlines():
        if not line.startswith("| `") or "/api/" not in line.split("|")[1]:
            continue
        route_cell, answer = line.split("|")[1], "|".join(line.split("|")[2:])
        routes = []
        for method, path in re.findall(r"`((?:GET|POST|DELETE)(?:`/`(?:GET|POST))?) (/api/[^`]*)`",
                                       route_cell):
            base = path.split("?")[0]
            for m in method.split("`/`"):
                routes.append((m, base))
        for tail in re.findall(r", `(/[a-z]+)`", route_cell):  # "/pause, /resume, /cancel"
            routes.append(("POST", routes[0][1].rsplit("/", 1)[0] + tail))
        # Settings' values a row mentions ("turkish", country "TR"): no fields of the API.
        fields = set(re.findall(r'"([a-z_A-Z0-9]+)"', answer)) - {"error", "turkish", "TR"}
        rows.append((routes, fields))
    return rows


def shape(path: str) -> str:
    """A path with its parameters unnamed (docs/api.md says ``{id}``, the app ``{job_id}``)."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def test_every_route_and_field_docs_api_md_documents_is_in_the_schema() -> None:
    paths = {shape(p): ops for p, ops in document()["paths"].items()}
    rows = documented_rows()
    assert len(rows) > 15
    missing = []
    for routes, fields in rows:
        names = names_in(document()["components"])  # Error's, which every refusal has
        for method, path in routes:
            ops = paths.get(shape(path), {})
            assert method.lower() in ops, (method, path)
            names |= names_in(ops[method.lower()])
        if fields - names:
            missing.append((routes, sorted(fields - names)))
    assert missing == []


def test_it_is_served_without_a_key(server: Server) -> None:
    got = httpx.get(server.url + "/api/openapi.json", timeout=10)
    assert got.status_code == 200 and got.json() == document()


def test_answers_are_checked_against_it(server: Server, api_key: str, tmp_path: Path) -> None:
    with server.client(api_key) as api:  # each /api/* JSON answer checked as it arrives
        assert api.get("/api/jobs").status_code == 200
        assert api.get("/api/campaigns/999").status_code == 404
