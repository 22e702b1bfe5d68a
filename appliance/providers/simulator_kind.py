"""The built-in provider simulator (``kind = "simulator"``): Vonage's wire format.

``appliance demo`` and ``appliance simulator`` run a local fake of the Vonage SMS API,
so this kind is the Vonage adapter with local defaults filled in wherever the provider
table leaves a setting empty: the simulator's address, demo credentials, and a shared
signature secret, so delivery receipts are signed (and checked) out of the box exactly
as a real signed Vonage account would sign them.

Beyond Vonage: status 9 (no credit) and 15 (a sender not registered) answered for every
part hold the provider's lane instead of retrying or rejecting the message
(:data:`BLOCKING_STATUS`), and the balance is asked as Vonage's ``get-balance``.

The webhook timestamp skew check is off by default (``max_skew_s = 0``): the simulator
may run against a test clock moved by hours, and a local demo has nothing to replay.

It can be asked (ROUTE-2): the simulator's ``GET /sms/status`` (its format in
:mod:`appliance.simulator.status_pull`; Vonage's SMS API has none) answers, per
client-ref, the very receipts it pushes, so a pulled report and the pushed one are one
fact in the inbox. A receipt word Vonage does not document, or an item state the
simulator does not, is an ``error`` for that message: never a state.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import httpx

from appliance.config import OptionValue, ProviderSettings
from appliance.message_text.segments import TURKISH_TABLES
from appliance.states import REPORTED_FINAL_STATES

from .base import OutgoingMessage
from .batch import BatchWireFormat, batch_validity_s
from .callbacks import CallbackRequest, ParsedReport, report
from .credit import CreditQuery
from .http_kind import http_kind
from .kind import BuildContext
from .outcome import Outcome, blocked
from .status_query import PullAnswer, PullTarget, PullVerdict, StatusQuery
from .transport import Provider
from .validity_fields import TTL_RANGE_S
from .vonage import (
    DLR_STATES,
    ROUTE_REFUSALS,
    VonageAdapter,
    VonageInbound,
    dlr_error_code,
    dlr_time_ms,
)
from .wire_text import load_json

SIMULATOR_BASE_URL = "http://127.0.0.1:9090"
SIMULATOR_API_KEY = "simulator"
SIMULATOR_API_SECRET = "simulator-api-secret"
SIMULATOR_SIGNATURE_SECRET = "simulator-signature-secret"


def with_simulator_defaults(settings: ProviderSettings) -> ProviderSettings:
    """``settings`` with the simulator's defaults in place of empty values."""
    return replace(
        settings,
        base_url=settings.base_url or SIMULATOR_BASE_URL,
        options={
            **settings.options,
            "api_key": settings.option("api_key") or SIMULATOR_API_KEY,
            "api_secret": settings.option("api_secret") or SIMULATOR_API_SECRET,
            "signature_secret": settings.option("signature_secret")
            or SIMULATOR_SIGNATURE_SECRET,
        },
    )


# The simulator's answers that refuse every message until its operator acts, as the
# aggregators' kinds map theirs (the vonage kind keeps its own mapping: 9 is RETRY).
BLOCKING_STATUS = {"9": "no_credit", "15": "sender_not_registered"}
BALANCE_PATH = "/account/get-balance"


class SimulatorAdapter(VonageAdapter, StatusQuery, CreditQuery):
    """The Vonage adapter, pointed at the local simulator, signing on by default; the
    simulator's status query, and its balance query, Vonage's ``GET
    /account/get-balance`` (``{"value": ...}``)."""

    kind = "simulator"
    CALLBACK_MAX_CHARS: ClassVar[int | None] = None  # Vonage's limit, not the simulator's
    status_batch_max = 100  # GET /sms/status takes up to 100 refs
    # batch = true: many numbers of one text a request (the simulator's POST /sms/batch).
    OPTIONS: ClassVar[Mapping[str, OptionValue]] = {**VonageAdapter.OPTIONS, "batch": False}

    def interpret_response(self, response: httpx.Response) -> Outcome:
        """Vonage's reading, except that a status that refuses every message (status 9,
        Partner Quota Violation: no credit; 15, Invalid Sender Address: the header is not
        registered) in every entry holds the lane (:func:`blocked`)."""
        if 200 <= response.status_code < 300:
            try:
                entries = load_json(response.content)["messages"]
                codes = {str(e["status"]).strip() for e in entries}
            except (ValueError, KeyError, TypeError):
                codes = set()
            if len(codes) == 1 and (code := codes.pop()) in BLOCKING_STATUS:
                text = entries[0].get("error-text") if isinstance(entries[0], dict) else None
                return blocked(BLOCKING_STATUS[code],
                               f"simulator status {code}{f': {text}' if text else ''}")
        return super().interpret_response(response)

    def build_credit_request(self) -> httpx.Request:
        return httpx.Request("GET", self.endpoint(BALANCE_PATH),
                             params={"api_key": self.option_str("api_key"),
                                     "api_secret": self.option_str("api_secret")},
                             headers={"Accept": "application/json"})

    def _read_credit(self, body: bytes, content_type: str) -> float:
        value = load_json(body)["value"]
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("value is not a number")
        return float(value)

    def __init__(
        self, settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None,
        tolerated: Iterable[str] = (),
    ) -> None:
        super().__init__(with_simulator_defaults(settings), now_ms=now_ms, tolerated=tolerated)

    def encoding_params(self, msg: OutgoingMessage) -> dict[str, str]:
        """A GSM-7 Turkish message (ENC-1) goes as text with ``national-language``, so
        the simulator splits it into the parts the appliance counted."""
        if msg.encoding == "GSM-7 Turkish":
            return {"type": "text", "national-language": "turkish"}
        return {}


    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        """``GET /sms/status?ref=...`` with the account's key and secret as Basic
        credentials (kept out of the query, which is stored with the answer)."""
        pair = f"{self.option_str('api_key')}:{self.option_str('api_secret')}"
        auth = "Basic " + base64.b64encode(pair.encode()).decode()
        return httpx.Request("GET", self.endpoint("/sms/status"),
                             params=[("ref", t.ref) for t in targets],
                             headers={"Authorization": auth, "Accept": "application/json"})

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        data = load_json(answer.body)
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return PullAnswer.failed("simulator status answer without items")
        asked = {t.ref for t in targets}
        reports: list[ParsedReport] = []
        verdicts: dict[str, PullVerdict] = {}
        for item in items:
            if not isinstance(item, dict) or item.get("client-ref") not in asked:
                continue
            ref = str(item["client-ref"])
            verdict, found = _item_verdict(ref, item)
            verdicts[ref] = verdict
            reports += found
        return PullAnswer(tuple(reports), verdicts)


def _item_verdict(ref: str, item: dict[str, Any]) -> tuple[PullVerdict, list[ParsedReport]]:
    """One item of ``GET /sms/status``: its verdict and the reports it carries."""
    state = item.get("state")
    if state == "unknown":
        return PullVerdict.UNKNOWN_ID, []
    if state == "pending":
        return PullVerdict.PENDING, []
    receipts = item.get("receipts")
    if state != "reported" or not isinstance(receipts, list) or not receipts:
        return PullVerdict.ERROR, []
    found: list[ParsedReport] = []
    for params in receipts:
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            return PullVerdict.ERROR, []
        status = params.get("status", "").strip()
        state_word = DLR_STATES.get(status.lower())
        if state_word is None or params.get("client-ref", ref) != ref:
            return PullVerdict.ERROR, []  # a word Vonage does not document: no state
        found.append(report(ref=ref, provider_msg_id=params.get("messageId"), status=status,
                            state=state_word, reported_at_ms=dlr_time_ms(params),
                            error_code=dlr_error_code(params)))
    final = all(r.state in REPORTED_FINAL_STATES for r in found)
    return (PullVerdict.FINAL if final else PullVerdict.PENDING), found



class SimulatorBatchAdapter(SimulatorAdapter, BatchWireFormat):
    """The simulator with ``batch = true``: a campaign goes up to ``batch_max`` numbers
    a request to ``POST /sms/batch``, a JSON object of the single submission's fields
    with ``messages: [{"to", "client-ref"}]``; the answer's ``results`` are one single
    submission's answer per number, in order, each read as that one would be."""

    def build_batch_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        first = replace(msgs[0], validity_s=batch_validity_s(msgs))
        common = {k: v for k, v in self.submit_params(first).items()
                  if k not in ("to", "client-ref")}
        numbers = [{"to": m.msisdn.removeprefix("+"), "client-ref": m.ref} for m in msgs]
        return httpx.Request("POST", self.endpoint(BATCH_PATH),
                             json={**common, "messages": numbers},
                             headers={"Accept": "application/json"})

    def _interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                  response: httpx.Response) -> list[Outcome]:
        failed = self.interpret_response(response) if not 200 <= response.status_code < 300 \
            else None
        if failed is not None:  # the whole request answered at once
            return [failed for _ in msgs]
        results = load_json(response.content)["results"]
        if not isinstance(results, list):
            raise ValueError("results is not a list")
        return [self.interpret_response(httpx.Response(200, json=r)) for r in results]


BATCH_PATH = "/sms/batch"
# It splits a text in the Turkish tables as an SMSC does (encoding_params).
# It can be asked about a message (status_query: GET /sms/status).
# Vonage's wire: its ttl, and its statuses that say "this route cannot" (ROUTE-3).
_ONE = http_kind(SimulatorAdapter, VonageInbound, counting=TURKISH_TABLES, status_query=True,
                 validity_range_s=TTL_RANGE_S, route_refusals=ROUTE_REFUSALS)
_MANY = http_kind(SimulatorBatchAdapter, VonageInbound, counting=TURKISH_TABLES,
                  status_query=True, many_per_request=True, validity_range_s=TTL_RANGE_S,
                  route_refusals=ROUTE_REFUSALS)


def _build(settings: ProviderSettings, ctx: BuildContext) -> Provider:
    """One message a request, or many with ``batch = true``."""
    return (_MANY if settings.option("batch", False) is True else _ONE).build(settings, ctx)


KIND = replace(_ONE, build=_build)
