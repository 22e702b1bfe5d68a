"""A Vonage receipt is read once per callback: the signature, the reports and the signed
age share the one reading (``CallbackRequest.derived``), and ``message-timestamp`` in
Vonage's own shape is read without ``strptime``, to the same time ``strptime`` gives.
(What a report costs on the intake: docs/benchmarks.md, "Report intake".)"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from appliance.providers import CallbackRequest
from appliance.providers.vonage import dlr_time_ms, vonage_signature
from appliance.web.callback_check import check
from tests.providers.provider_test_support import NOW_MS
from tests.providers.test_provider_vonage import CB_URL, adapter

SECRET = "a-signature-secret"


def signed_body(ref: str) -> bytes:
    params = {"msisdn": "447700900000", "to": "AcmeInc", "messageId": f"M{ref}",
              "client-ref": ref, "status": "delivered", "err-code": "0",
              "message-timestamp": "2026-01-01 12:34:56",
              "timestamp": str(NOW_MS // 1000), "nonce": f"n{ref}"}
    params["sig"] = vonage_signature(params, SECRET, "sha256")
    return json.dumps(params).encode()


def test_the_callback_is_read_once_for_its_signature_reports_and_age(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reader = adapter(signature_secret=SECRET, signature_method="sha256")
    reads: list[bytes] = []
    real = reader._read_params

    def counted(req: CallbackRequest) -> dict[str, str]:
        reads.append(req.body)
        return real(req)

    monkeypatch.setattr(reader, "_read_params", counted)
    body = signed_body("R1")
    checked = check(reader, "main", "POST", CB_URL, "", {"content-type": "application/json"},
                    body)
    assert [r.ref for r in checked.reports] == ["R1"]
    assert checked.signed_age_s == pytest.approx(0, abs=1)
    assert reads == [body]  # verified, parsed and aged from one reading
    # A second callback is read again: nothing is kept between requests.
    check(reader, "main", "POST", CB_URL, "", {"content-type": "application/json"},
          signed_body("R2"))
    assert len(reads) == 2


@pytest.mark.parametrize("stamp", [
    "2026-01-01 12:34:56", "1999-12-31 23:59:59", "2024-02-29 00:00:00",
    "2026-02-29 00:00:00", "2026-13-01 00:00:00", "2026-01-01 24:00:00",
    "2026-01-01 00:00:60", "2026-1-1 1:2:3", "2026-01-01T00:00:00", "", "  ",
])
def test_message_timestamp_reads_as_strptime_reads_it(stamp: str) -> None:
    try:
        expected = int(datetime.strptime(stamp.strip(), "%Y-%m-%d %H:%M:%S")
                       .replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        expected = 0  # then scts, absent here: no time
    assert dlr_time_ms({"message-timestamp": stamp}) == expected
