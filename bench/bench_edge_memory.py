"""Edge benchmark (EDGE-2): server memory under concurrent 60 MB JSON imports.

Against a real ``appliance serve`` with the default limits, it records the server's
peak RSS (sampled from ``/proc`` every 10 ms) for

- the baseline, same run: one 60 MB JSON import of 990,000 lines, read whole and
  accepted;
- twelve at once of 60 MB JSON bodies of 4,000,000 lines each: over the 1,000,000
  row limit, so each is refused ``413 too_many_rows`` while it streams in;
- twelve at once of the 990,000-line body: within the limits, so the body budget
  (``[http] max_inflight_body_bytes``, 256 MB) decides how many are read at once and
  answers the rest ``503 server_busy``.

Run: ``.venv/bin/python bench/bench_edge_memory.py``
"""

from __future__ import annotations

import collections
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import Server, create_account  # noqa: E402

CONCURRENT = 12


def rss_kb(pid: int) -> int:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) if found else 0


def peak_during(srv: Server, key: str, body: bytes, clients: int) -> tuple[float, dict[str, int]]:
    assert srv.proc is not None
    pid = srv.proc.pid
    peak = rss_kb(pid)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kb(pid))
            time.sleep(0.01)

    answers: collections.Counter[str] = collections.Counter()

    def send() -> None:
        with httpx.Client(base_url=srv.url, timeout=300,
                          headers={"Authorization": f"Bearer {key}"}) as client:
            answer = client.post("/api/contacts/import", content=body,
                                 headers={"Content-Type": "application/json"})
            error = answer.json().get("error") if answer.status_code >= 400 else ""
            answers[f"{answer.status_code} {error}".strip()] += 1

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=send) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    sampler.join()
    return peak / 1024, dict(answers)


def main() -> int:
    within = json.dumps({"list": "within", "text": ("+905321234567," + "x" * 45 + "\n")
                         * 990_000}).encode()
    over = json.dumps({"list": "over", "text": "+905321234567\n" * 4_000_000}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        srv = Server(data_dir).start()
        try:
            key = create_account(data_dir)
            assert srv.proc is not None
            print(f"idle server: {rss_kb(srv.proc.pid) / 1024:.0f} MB RSS")
            for label, body, clients in (
                    ("baseline: one 60 MB import, accepted", within, 1),
                    (f"{CONCURRENT} x 60 MB over the row limit", over, CONCURRENT),
                    (f"{CONCURRENT} x 60 MB within the limits", within, CONCURRENT)):
                started = time.perf_counter()
                peak, answers = peak_during(srv, key, body, clients)
                print(f"{label}: peak {peak:.0f} MB RSS, {time.perf_counter() - started:.1f} s,"
                      f" answers {answers}")
        finally:
            srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
