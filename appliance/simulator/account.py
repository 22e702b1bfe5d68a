"""The simulated provider's account: its balance, and refusals of every submission.

Vonage's ``GET /account/get-balance`` answers the balance (``{"value", "autoReload"}``);
while it is 0 or less every submission is answered status 9 (Partner Quota Violation),
as Vonage answers an account out of credit. The test hook ``POST /_sim/account`` sets
the balance (``{"credit": N}``) or a status answered to every submission
(``{"refuse": "15"}``; ``null``: no more), so a held lane and its retries can be seen
without a real account.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from appliance.simulator.behaviour import Behaviour


class SimAccount:
    """The balance, the refusal in force, and what was asked of them."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.credit = behaviour.credit
        self.refusing: str | None = None  # a status answered to every submission
        self.refused = 0
        self.balance_queries = 0

    def refusal(self) -> tuple[str, str] | None:
        """The status (and error text) every submission gets now, counted; ``None``
        while the account can send."""
        if self.refusing is not None:
            self.refused += 1
            return self.refusing, "scripted account refusal"
        if self.credit <= 0:
            self.refused += 1
            return "9", "Partner Quota Violation: not enough credit to send"
        return None

    async def balance(self, request: Request) -> Response:
        """Vonage's ``GET /account/get-balance``: ``{"value", "autoReload"}``."""
        b = self.behaviour
        q = request.query_params
        if q.get("api_key") != b.api_key or q.get("api_secret") != b.api_secret:
            return JSONResponse({"error-code": "401", "error-code-label": "Unauthorized"},
                                status_code=401)
        self.balance_queries += 1
        return JSONResponse({"value": self.credit, "autoReload": False})

    async def set(self, request: Request) -> Response:
        """The test hook: ``{"credit"?: N, "refuse"?: "15" | null}``."""
        try:
            data = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse({"error": "invalid_json"}, status_code=400)
        if not isinstance(data, dict):
            return JSONResponse({"error": 'want {"credit"?, "refuse"?}'}, status_code=400)
        credit = data.get("credit", self.credit)
        refuse = data.get("refuse", self.refusing)
        if isinstance(credit, bool) or not isinstance(credit, int | float) or not (
                refuse is None or isinstance(refuse, str)):
            return JSONResponse({"error": "credit is a number, refuse a status or null"},
                                status_code=400)
        self.credit, self.refusing = float(credit), refuse
        return JSONResponse({"credit": self.credit, "refuse": self.refusing})

    def snapshot(self) -> dict[str, float | int]:
        return {"credit": self.credit, "refused": self.refused,
                "balance_queries": self.balance_queries}
