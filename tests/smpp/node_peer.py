"""node-smpp's server (npm ``smpp``) as an SMSC for the tests: one we did not write.

``tests/smpp/node_smsc/smsc.js`` listens on a free port, answers every ``submit_sm`` and
pushes a receipt for it (none with ``receipts=False``), answers ``query_sm``, and prints
every PDU it saw as one JSON line, with the bytes it received (``short_message`` in hex,
UDH included) and node-smpp's own reading of them.
:func:`node_smsc` is the fixture; it skips with the reason when ``node`` or the npm
package is not installed (``npm ci`` in ``tests/smpp/node_smsc``, as ``.ci/run`` does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent / "node_smsc"


class NodeSmsc:
    def __init__(self, receipts: bool = True) -> None:
        node = shutil.which("node")
        if node is None:
            pytest.skip("node is not installed: the node-smpp SMSC cannot run")
        if not (HERE / "node_modules" / "smpp").is_dir():
            pytest.skip("node-smpp is not installed: run `npm ci` in tests/smpp/node_smsc")
        env = {**os.environ, "SMSC_RECEIPTS": "on" if receipts else "off"}
        self.proc = subprocess.Popen([node, "smsc.js"], cwd=HERE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == kind]

    def seen(self, kind: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The ``kind`` events once ``count`` of them are read: a PDU is printed before
        it is answered, but the thread reading the prints can lag the answer."""
        deadline = time.monotonic() + timeout
        while len(self.of(kind)) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"node-smpp printed {len(self.of(kind))} {kind!r}, not {count}")
            time.sleep(0.01)
        return self.of(kind)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while not self.of("ready"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"the node-smpp SMSC did not start: {err}")
            time.sleep(0.02)
        self.port = int(self.of("ready")[0]["port"])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(5)


@pytest.fixture
def node_smsc() -> Iterator[NodeSmsc]:
    smsc = NodeSmsc()
    try:
        smsc.wait_ready()
        yield smsc
    finally:
        smsc.stop()
