"""Our session against an SMSC the project did not write (smpp34's server, in Rust).

The built-in simulator and the session share this project's reading of SMPP 3.4; this
peer does not, so a misunderstanding both of ours share cannot pass here.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.providers.base import SubmitResult
from appliance.smpp.deliver import Deliver
from appliance.smpp.session import SmppSession
from appliance.smpp.status import ESME_RX_T_APPN
from tests.smpp.support import Store, message, run, settings_for, wait_until

ROOT = Path(__file__).resolve().parents[2]


class ForeignSmsc:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.smpp.foreign_smsc", str(self.port)], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 10
        while not self.of("ready"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"foreign SMSC did not start: {err}")
            time.sleep(0.02)


@pytest.fixture
def foreign() -> Iterator[ForeignSmsc]:
    smsc = ForeignSmsc()
    try:
        smsc.wait_ready()
        yield smsc
    finally:
        smsc.proc.kill()
        smsc.proc.wait(5)


def test_against_smpp34s_server(foreign: ForeignSmsc) -> None:
    attempts: dict[str, int] = {}

    def fail_first_receipt(d: Deliver) -> bool:
        if d.receipt is None:
            return False
        attempts[d.receipt.key] = attempts.get(d.receipt.key, 0) + 1
        return attempts[d.receipt.key] == 1

    store = Store(fail=fail_first_receipt)

    async def body() -> None:
        session = SmppSession(settings_for(foreign.port, enquire_link_s=0.1,
                                           response_timeout_s=0.3), store.on_deliver)
        await session.start()
        try:
            assert await session.wait_bound(5), session.state()
            segs = (message("a", "hello world") + message("b", "İptal için DUR yazın " * 5)
                    + message("c", "{curly} €uro"))
            outs = await session.submit(segs)
            assert {o.result for o in outs} == {SubmitResult.ACCEPTED}
            await wait_until(lambda: len(store.receipt_keys()) == len(segs), timeout=10,
                             what="receipts")
            await wait_until(lambda: any(not d.is_receipt for d in store.stored), what="MO")
            # Its enquire_link answers (one asked every 0.1 s, 0.3 s to answer) keep the
            # link up.
            since = session.state().bound_since_ms or 0
            await wait_until(lambda: time.time() * 1000 - since > 800, what="0.8 s bound")
            assert session.state().reconnects == 0 and session.state().bound
        finally:
            await session.stop()
        # The peer read every field as we meant it (it may see them in any order).
        submits = {e["id"]: e for e in foreign.of("submit")}
        assert len(submits) == len(segs)
        for seg, out in zip(segs, outs, strict=True):
            e = submits[out.message_id or ""]
            assert bytes.fromhex(e["short_message"]) == seg.short_message
            assert (e["esm_class"], e["data_coding"], e["registered_delivery"]) == (
                seg.esm_class, seg.data_coding, 1)
            assert (e["destination"], e["dest_ton"], e["source"], e["source_ton"]) == (
                "905321234567", 1, "ACME", 5)
        assert sorted(store.receipt_keys()) == sorted(o.id_key or "" for o in outs)
        # Not stored at first: answered ESME_RX_T_APPN; delivered again: ESME_ROK.
        statuses = {(e["id"], e["attempt"]): e["status"] for e in foreign.of("deliver_resp")}
        for o in outs:
            assert (statuses[(o.message_id, 1)], statuses[(o.message_id, 2)]) == (
                ESME_RX_T_APPN, 0)
        [mo] = [d for d in store.stored if not d.is_receipt]
        assert mo.text == "IPTAL et" and mo.source_addr == "905320000001"
        await wait_until(lambda: foreign.of("mo_resp") and foreign.of("unbound"),
                         what="unbind seen by the peer")
        assert foreign.of("mo_resp") == [{"event": "mo_resp", "status": 0}]

    run(body())
