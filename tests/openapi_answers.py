"""The API's answers checked against its OpenAPI description (TEAM-4), for the tests'
shared client (:meth:`tests.harness.Server.client`)."""

from __future__ import annotations

import functools
import re
from typing import Any

from jsonschema import Draft202012Validator

from appliance.web.openapi import document


@functools.cache
def _operations() -> list[tuple[re.Pattern[str], str, dict[str, Any]]]:
    out = []
    for path, ops in document()["paths"].items():
        pattern = re.compile("^" + re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(path)) + "$")
        for method, op in ops.items():
            out.append((pattern, method.upper(), op))
    # Fixed paths before templated ones (/api/consents.csv before /api/consents/{x}).
    return sorted(out, key=lambda o: o[0].pattern.count("[^/]+"))


def _schema_for(method: str, path: str, status: int) -> dict[str, Any] | None:
    components = document()["components"]
    for pattern, op_method, op in _operations():
        if op_method == method and pattern.match(path):
            answer = op["responses"].get(str(status))
            if answer is not None:
                schema = answer["content"].get("application/json", {}).get("schema")
                return None if schema is None else {**schema, "components": components}
            break
    if status >= 400:  # a refusal no route lists (400, 404, 405, 408, 413, 503...)
        return {"$ref": "#/components/schemas/Error", "components": components}
    return None


def check_answer(method: str, path: str, status: int, body: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when ``body`` does not fit the description;
    a success status the description does not list for its route fails too."""
    schema = _schema_for(method, path, status)
    if schema is None:
        raise AssertionError(f"{method} {path} answered {status}, which"
                             " appliance/web/openapi.py does not describe")
    Draft202012Validator(schema).validate(body)
