"""How the simulated SMSC behaves: every knob, with the defaults of a calm day."""

from __future__ import annotations

from dataclasses import dataclass

ID_STYLES = ("hex", "decimal", "hex-text-decimal", "hex-counting")
SEPTET_LAYOUTS = ("unpacked", "packed")  # as a provider's ``septets`` (appliance.smpp.encoding)


@dataclass(frozen=True)
class SmscBehaviour:
    """Knobs; every rate is a probability per ``submit_sm`` (0 to 1)."""

    system_id: str = "appliance"  # the ESME's system_id it accepts
    password: str = "secret"  # anything else: ESME_RINVPASWD
    smsc_system_id: str = "SIMSMSC"  # what it answers binds with
    delivered_rate: float = 0.82  # the rest UNDELIV or EXPIRED
    expired_share: float = 0.3  # of the undelivered, how many EXPIRED
    delay_min_ms: int = 20  # receipt delay after the submit_sm_resp
    delay_max_ms: int = 200
    silent_rate: float = 0.0  # never send a receipt (1 = receipts off)
    early_receipts: float = 0.0  # the receipt is written before the submit_sm_resp
    duplicate_rate: float = 0.0  # the final receipt twice
    repeat_delay_ms: int = 0  # a receipt's later words (its duplicate) come this much later
    intermediate_rate: float = 0.0  # an ENROUTE receipt before the final one
    reorder_rate: float = 0.0  # the final receipt first, an ENROUTE one after it
    throttle_rate: float = 0.0  # answer throttle_status (not taken)
    throttle_status: int = 0x58  # ESME_RTHROTTLED; 0x14 is ESME_RMSGQFUL
    reject_rate: float = 0.0  # answer ESME_RINVDSTADR (not taken, final)
    fail_segment_rate: float = 0.0  # of concatenated messages: last segment UNDELIV
    unanswered_rate: float = 0.0  # taken, never answered (the receipt still comes)
    drop_every: int = 0  # close the session after every Nth submit_sm (taken, unanswered)
    # hex | decimal | hex-text-decimal (hex answered, decimal in the text) | hex-counting
    # (hex counted up from 10000000: the first ten ids show no letter)
    ids: str = "hex"
    receipt_tlvs: bool = True  # receipted_message_id and message_state besides the text
    seconds_in_dates: bool = False  # 12-digit dates (else 10: minute resolution)
    resp_delay_ms: int = 0  # answer every submit_sm this late (fills the ESME's window)
    redeliver_ms: int = 200  # a receipt not answered ESME_ROK is sent again this much later
    septets: str = "unpacked"  # how it reads data_coding 0: one septet an octet, or packed
    seed: int | None = None

    def check(self) -> SmscBehaviour:
        rates = ("delivered_rate", "expired_share", "silent_rate", "early_receipts",
                 "duplicate_rate", "intermediate_rate", "reorder_rate", "throttle_rate",
                 "reject_rate", "fail_segment_rate", "unanswered_rate")
        for name in rates:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if not 0 <= self.delay_min_ms <= self.delay_max_ms:
            raise ValueError("need 0 <= delay_min_ms <= delay_max_ms")
        if self.ids not in ID_STYLES:
            raise ValueError(f"ids must be one of {', '.join(ID_STYLES)}")
        if self.septets not in SEPTET_LAYOUTS:
            raise ValueError(f"septets must be one of {', '.join(SEPTET_LAYOUTS)}")
        if (self.drop_every < 0 or self.resp_delay_ms < 0 or self.repeat_delay_ms < 0
                or self.redeliver_ms < 1):
            raise ValueError("drop_every, resp_delay_ms and repeat_delay_ms >= 0,"
                             " redeliver_ms >= 1")
        return self
