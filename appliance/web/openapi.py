"""``GET /api/openapi.json``: the OpenAPI 3.1 description of every ``/api/*`` route.

Built from :data:`OPERATIONS`, a declarative table (method, path, summary, request
body, answers) kept here beside the routes' modules, rather than one hand-written JSON
document; ``tests/web/test_openapi.py`` fails when an ``/api/*`` route of the app is
missing from it. Schemas name the fields ``docs/api.md`` documents and are open
(``additionalProperties`` allowed): a client generated from it keeps working when a
field is added. No key is needed: it tells nothing about any account.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance import __version__

Schema = dict[str, Any]
ANY: Schema = {}
STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}


def null(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


def obj(required: tuple[str, ...] = (), **props: Schema) -> Schema:
    out: Schema = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    return out


def arr(item: Schema) -> Schema:
    return {"type": "array", "items": item}


ERROR = obj(("error", "message"), error=STR, message=STR)


@dataclass(frozen=True)
class Operation:
    """One route and method: what it takes and what it answers (status -> schema)."""

    method: str
    path: str
    summary: str
    answers: dict[int, Schema]
    body: Schema | None = None
    query: dict[str, Schema] = field(default_factory=dict)
    errors: tuple[int, ...] = (401, 404, 422)
    refusal: Schema | None = None  # what its refusals add to Error (codes, facts)


def refused(*codes: str, **facts: Schema) -> Schema:
    """The codes a route's refusals may carry (as examples: a new code stays valid) and
    the facts they add beside ``error`` and ``message``."""
    return {"type": "object",
            "properties": {"error": {"type": "string", "examples": list(codes)}, **facts}}


JOB = obj(("id", "state"), id=INT, state=STR, list=ANY, total=ANY, processed=ANY,
          inserted=ANY, duplicates=ANY, duplicates_in_paste=ANY, duplicates_in_list=ANY,
          rejected=ANY, blank=ANY, header_skipped=ANY, rejects_url=ANY, payload_pruned=ANY,
          payload_pruned_at=ANY, rerun_of=ANY)
JOB_ACCEPTED = obj(("jobId",), jobId=INT, total=ANY, poll=STR, state=STR, rerun_of=ANY)
LIST = obj(("name",), name=STR, contacts=INT)
MESSAGE = obj(("ref", "state"), ref=STR, state=STR, final=BOOL, to=STR, provider=STR,
              provider_msg_id=ANY, encoding=STR, parts=INT, ucs2_because=ANY,
              ucs2_parts=ANY, campaign_id=ANY, priority=STR, attempts=INT, error=ANY,
              error_kind={"anyOf": [{"type": "string", "examples": ["iys"]},
                                    {"type": "null"}]},
              created_at=ANY, submitted_at=ANY, finalised_at=ANY, updated_at=ANY,
              expires_at=ANY, part_reports=arr(ANY), actions=arr(ANY), pulls=ANY,
              # ROUTE-3: the prefix of the route that chose its provider, and each try.
              route=null(STR), attempts_by_provider=arr(obj(
                  ("provider", "outcome", "at"), provider=STR, at=STR, outcome={
                      "type": "string", "examples": [
                          "accepted", "retry", "rejected", "uncertain", "unreached",
                          "blocked", "route_refused", "failed_over"]})),
              history=arr(obj(part=ANY, state=ANY, status=ANY, source={
                  "type": "string", "examples": ["callback", "session", "pull"]})))
SENT = obj(("ref", "state"), ref=STR, state=STR, priority=STR, encoding=STR, parts=INT,
           ucs2_because=ANY, ucs2_parts=ANY, poll=STR)
CAMPAIGN = obj(("id", "state"), id=INT, campaignId=INT, state=STR, list=STR, provider=STR,
               total=INT, parts=ANY, parts_per_message=ANY, encoding=ANY, ucs2_parts=ANY,
               ucs2_because=ANY, suppressed=ANY, cancelled=ANY, uncertain=ANY,
               iys_refused=INT, expired=INT, validity_s=INT,
               coverage_pct=NUM, delivered_pct=NUM, messages_per_s=NUM, eta_s=ANY,
               eta_at=ANY, send_at=ANY, window=ANY, window_open=BOOL, finalised=ANY,
               counts=ANY, poll=STR)
TYPE: Schema = {"type": "string", "examples": ["commercial", "transactional"]}
# ROUTE-4: whole seconds; 0 the provider's own validity; absent, [sending] validity_s.
VALIDITY: Schema = {"type": "integer", "minimum": 0}
CAMPAIGN_NEW = obj(("list", "body"), list=STR, body=STR, provider=STR, send_at=ANY,
                   window=ANY, dry_run=BOOL, type=TYPE, validity_s=VALIDITY)
CAMPAIGN_ANSWER = {"anyOf": [
    obj(("campaignId",), campaignId=INT, total=INT, parts=ANY, state=STR, poll=STR),
    obj(("dry_run",), dry_run=BOOL, list=STR, provider=STR, messages=INT, parts=INT,
        parts_per_message=INT, encoding=STR, ucs2_parts=ANY, ucs2_because=ANY,
        suppressed=INT, no_consent=INT, duplicate_today=INT)]}
ACTION = obj(("action",), action={"enum": ["resend", "mark_failed"]})
SUPPRESSION = obj(("msisdn",), msisdn=STR, reason=ANY, source=ANY)
LOADED = obj(("added", "rejected"), added=INT, already=INT, updated=INT, unchanged=INT,
             rejected=INT, rejects=arr(obj(line_number=ANY, line=ANY, reason=ANY)))
# The caller's account's receiver: its own ("account") or the [webhooks] one (TEAM-2).
WEBHOOKS = obj(("receiver", "enabled", "waiting"), receiver={"enum": ["account", "webhooks"]},
               enabled=BOOL, waiting=INT, oldest_waiting_at=ANY, oldest_waiting_age_s=ANY,
               written=INT, delivered=INT, failed_attempts=INT, consecutive_failures=INT,
               paused_until=ANY, last_success_at=ANY, last_error=ANY, last_error_at=ANY)
STATS = obj((), coverage_pct=ANY, delivered_pct=ANY, window=ANY, live=ANY, inbox=ANY,
            overdue=ANY, iys_refused=INT, open_by_hour=ANY, live_window=ANY, live_by_hour=ANY,
            alerts=ANY, webhooks=WEBHOOKS, at=ANY)
CONSENT = obj(("msisdn",), msisdn=STR, status={"enum": ["ONAY", "RET"]},
              recipient_type={"enum": ["BIREYSEL", "TACIR"]}, source=ANY, consented_at=ANY,
              received_at=ANY, last_commercial_at=ANY, commercial_allowed=BOOL,
              result=ANY)
CSV = {"type": "string", "contentMediaType": "text/csv"}

OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/api/contacts/import", "Import numbers into a list",
              {202: JOB_ACCEPTED}, obj(("list", "text"), list=STR, text=STR, region=STR),
              errors=(401, 413, 422, 503)),
    Operation("GET", "/api/jobs", "The account's import jobs", {200: obj(jobs=arr(JOB))}),
    Operation("GET", "/api/jobs/{job_id}", "One import job", {200: JOB}),
    Operation("POST", "/api/jobs/{job_id}/cancel", "Cancel an unfinished job", {200: JOB}),
    Operation("POST", "/api/jobs/{job_id}/rerun", "A new job over a job's stored payload",
              {202: JOB_ACCEPTED}, obj(list=STR), errors=(401, 404, 409, 410, 422),
              refusal=refused("payload_pruned", "job_running", pruned_at=ANY)),
    Operation("GET", "/api/jobs/{job_id}/rejects.csv", "A job's rejected lines",
              {200: CSV}),
    Operation("GET", "/api/lists", "The account's lists", {200: obj(lists=arr(LIST))}),
    Operation("GET", "/api/lists/{name}", "One list", {200: LIST}),
    Operation("GET", "/api/stats", "Coverage, delivery, inbox, alerts, webhooks",
              {200: STATS}),
    Operation("POST", "/api/messages", "Send one message", {202: SENT},
              obj(("to", "body"), to=STR, body=STR, provider=STR,
                  priority={"enum": ["high", "normal"]}, type=TYPE, validity_s=VALIDITY),
              errors=(401, 409, 422, 429, 503),
              refusal=refused("suppressed", "unsendable_body", "invalid_unicode",
                              "rate_limited", "daily_limit", "no_consent", "duplicate_today",
                              "type_required", "commercial_content", "invalid_validity",
                              missing=ANY, range_s=ANY,
                              msisdn=STR, reason=ANY, source=ANY, limit=ANY, parts=ANY,
                              used=ANY, requested=ANY, rate_per_s=ANY)),
    Operation("GET", "/api/messages", "The account's messages to a number",
              {200: obj(("messages",), msisdn=STR, messages=arr(MESSAGE))},
              query={"msisdn": STR}),
    Operation("GET", "/api/messages/{ref}", "One message", {200: MESSAGE}),
    Operation("POST", "/api/messages/{ref}/resolve", "Decide about an UNCERTAIN message",
              {200: MESSAGE}, ACTION, errors=(401, 404, 409, 422)),
    Operation("POST", "/api/messages/{ref}/pull", "Ask the provider about a message now",
              {202: obj(("ref",), ref=STR, pull={"type": "string", "examples": ["queued"]})},
              errors=(401, 404, 409), refusal=refused("not_pullable")),
    Operation("POST", "/api/campaigns", "Start a campaign, or dry-run it",
              {202: CAMPAIGN_ANSWER, 200: CAMPAIGN_ANSWER}, CAMPAIGN_NEW,
              errors=(401, 409, 422, 429, 503),
              refusal=refused("rate_limited", "daily_limit", "invalid_validity", limit=ANY,
                              used=ANY, requested=ANY, rate_per_s=ANY, range_s=ANY)),
    Operation("GET", "/api/campaigns", "The account's campaigns",
              {200: obj(("campaigns",), campaigns=arr(CAMPAIGN))}),
    Operation("GET", "/api/campaigns/{campaign_id}", "One campaign", {200: CAMPAIGN}),
    *(Operation("POST", f"/api/campaigns/{{campaign_id}}/{verb}", f"{verb.title()} a campaign",
                {200: CAMPAIGN}, errors=(401, 404, 409))
      for verb in ("pause", "resume", "cancel")),
    Operation("POST", "/api/campaigns/{campaign_id}/resolve",
              "Decide about every UNCERTAIN message of a campaign", {200: CAMPAIGN}, ACTION),
    Operation("GET", "/api/suppressions", "The account's suppression list",
              {200: obj(suppressions=arr(SUPPRESSION))},
              query={"msisdn": STR, "limit": INT, "before": ANY}),
    Operation("POST", "/api/suppressions", "Add numbers to the suppression list",
              {201: SUPPRESSION, 200: {"anyOf": [SUPPRESSION, LOADED]}},
              obj(("msisdn",), msisdn=STR, reason=STR)),
    Operation("DELETE", "/api/suppressions/{msisdn}", "Remove a number from the list",
              {200: ANY}),
    Operation("GET", "/api/inbound", "The account's inbound messages", {200: ANY},
              query={"msisdn": STR, "stops": STR, "limit": INT, "before": ANY}),
    Operation("POST", "/api/consents", "Record consents to commercial messages",
              {201: CONSENT, 200: {"anyOf": [CONSENT, LOADED]}}, CONSENT),
    Operation("GET", "/api/consents", "The account's consents",
              {200: obj(("consents",), consents=arr(CONSENT), total=INT, history=arr(ANY),
                        next=ANY)},
              query={"msisdn": STR, "status": STR}),
    Operation("GET", "/api/consents.csv", "The consents as CSV (audit export)", {200: CSV}),
)


def _operation(op: Operation) -> Schema:
    params = [{"name": name, "in": "path", "required": True, "schema": STR}
              for name in _path_names(op.path)]
    params += [{"name": name, "in": "query", "required": False, "schema": s}
               for name, s in op.query.items()]
    answers: Schema = {}
    for status, schema in op.answers.items():
        kind = "text/csv" if schema is CSV else "application/json"
        answers[str(status)] = {"description": op.summary, "content": {kind: {"schema": schema}}}
    error: Schema = {"$ref": "#/components/schemas/Error"}
    if op.refusal is not None:
        error = {"allOf": [error, op.refusal]}
    for status in op.errors:
        answers[str(status)] = {"description": "refused",
                                "content": {"application/json": {"schema": error}}}
    out: Schema = {"summary": op.summary, "responses": answers}
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {"content": {"application/json": {"schema": op.body}}}
    return out


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def document() -> Schema:
    """The OpenAPI 3.1 document of :data:`OPERATIONS`."""
    paths: Schema = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    itself = {"description": "OpenAPI 3.1",
              "content": {"application/json": {"schema": {"type": "object"}}}}
    paths["/api/openapi.json"] = {"get": {"summary": "This description", "security": [],
                                          "responses": {"200": itself}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "appliance", "version": __version__},
        "paths": paths,
        "components": {"schemas": {"Error": ERROR}, "securitySchemes": {
            "key": {"type": "http", "scheme": "bearer"}}},
        "security": [{"key": []}],
    }


async def openapi_json(request: Request) -> Response:
    return JSONResponse(document())


def routes() -> list[BaseRoute]:
    return [Route("/api/openapi.json", openapi_json, methods=["GET"])]
