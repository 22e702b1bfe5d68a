"""How the simulated provider behaves: every knob, with the defaults of a calm day."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.providers.simulator_kind import (
    SIMULATOR_API_KEY,
    SIMULATOR_API_SECRET,
    SIMULATOR_SIGNATURE_SECRET,
)

REPORT_FORMATS = ("form", "json", "get")


@dataclass(frozen=True)
class Behaviour:
    """Knobs; every rate is a probability per accepted submission (0 to 1)."""

    api_key: str = SIMULATOR_API_KEY
    api_secret: str = SIMULATOR_API_SECRET
    signature_secret: str = SIMULATOR_SIGNATURE_SECRET  # signs delivery receipts
    signature_method: str = "sha256"
    delivered_rate: float = 0.82  # the rest FAILED or EXPIRED
    expired_share: float = 0.3  # of the undelivered, how many EXPIRED (else FAILED)
    delay_min_ms: int = 50  # report delay after the submit answer
    delay_max_ms: int = 1500
    early_reports: float = 0.0  # push the reports before answering the submission (1 = all)
    duplicate_rate: float = 0.0  # push the final receipt twice
    reorder_rate: float = 0.0  # final first, an older intermediate later
    intermediate_rate: float = 0.0  # an "accepted"/"buffered" receipt before the final
    silent_rate: float = 0.0  # never report (neither pushed nor known to a status request)
    push_rate: float = 1.0  # share of messages whose receipts are pushed; the rest: pull only
    throttle_rate: float = 0.0  # refuse: HTTP 429 with Retry-After, or status "1" Throttled
    unknown_ref_rate: float = 0.0  # also push a receipt for a ref nobody submitted
    part_fail_rate: float = 0.0  # a multi-part message: one of its parts fails on its own
    retry_after_s: float = 1.0  # what a throttled answer asks for
    report_format: str = "form"  # form POST, JSON POST or GET, as Vonage accounts choose
    report_retries: int = 8  # delivery attempts per receipt on non-2xx or errors
    report_concurrency: int = 16
    callback_url: str = ""  # when a submission carries no callback
    inbound_url: str = ""  # where POST /_sim/inbound pushes inbound messages by default
    credit: float = 1000.0  # the account's balance (GET /account/get-balance)
    seed: int | None = None

    def check(self) -> Behaviour:
        rates = ("delivered_rate", "early_reports", "expired_share", "duplicate_rate",
                 "reorder_rate", "intermediate_rate", "silent_rate", "throttle_rate",
                 "unknown_ref_rate", "part_fail_rate", "push_rate")
        for name in rates:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if not 0 <= self.delay_min_ms <= self.delay_max_ms:
            raise ValueError("need 0 <= delay_min_ms <= delay_max_ms")
        if self.report_format not in REPORT_FORMATS:
            raise ValueError(f"report_format must be one of {', '.join(REPORT_FORMATS)}")
        return self
