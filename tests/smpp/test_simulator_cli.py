"""``appliance simulator --smpp-port P``: the SMSC simulator as its own process."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from appliance.providers.base import SubmitResult
from appliance.providers.simulator_kind import (
    SIMULATOR_API_KEY,
    SIMULATOR_API_SECRET,
    SIMULATOR_SIGNATURE_SECRET,
)
from appliance.smpp.session import SmppSession
from tests.harness import run_cli
from tests.smpp.support import Store, message, run, settings_for, wait_until

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_smpp_port_serves_an_smsc_with_the_given_credentials() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance", "simulator", "--port", "0", "--smpp-port", str(port),
         "--smpp-password", "pw", "--smpp-ids", "hex-text-decimal", "--smpp-no-tlvs",
         "--delay-min-ms", "0", "--delay-max-ms", "0", "--delivered-rate", "1", "--seed", "3"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    store = Store()

    async def body() -> None:
        session = SmppSession(settings_for(port, password="pw", reconnect_max_s=0.2),
                              store.on_deliver)
        await session.start()
        try:
            assert await session.wait_bound(10), session.state()
            outs = await session.submit(message("cli", "hello"))
            assert outs[0].result == SubmitResult.ACCEPTED
            await wait_until(lambda: store.receipt_keys() == [outs[0].id_key], what="receipt")
            [d] = store.stored
            assert d.receipt is not None and d.receipt.tlv_id is None
            assert d.receipt.status == "DELIVRD" and d.receipt.text_id == (
                f"{int(outs[0].message_id or '', 16):010d}")
        finally:
            await session.stop()

    try:
        run(body())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert f"SMSC simulator (SMPP 3.4) on 127.0.0.1:{port}" in err


def test_help_shows_the_credentials_a_provider_must_give() -> None:
    shown = " ".join(run_cli("simulator", "--help").stdout.split())
    for value in (SIMULATOR_API_KEY, SIMULATOR_API_SECRET, SIMULATOR_SIGNATURE_SECRET):
        assert f"default: {value}" in shown, value
