"""Run every benchmark in turn (``make bench``); each prints its own same-run baseline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = [
    "bench_writer.py",
    "bench_parse.py",
    "bench_import.py",
    "bench_contacts_order.py",
    "bench_callbacks_wrk.py",
    "bench_intake_cost.py",
    "bench_reports.py",
    "bench_summary.py",
    "bench_send.py",
    "bench_send_ceiling.py",
    "bench_claim.py",
    "bench_claim_iys.py",
    "bench_sender_units.py",
    "bench_webhook_trigger.py",
    "bench_smpp.py",
    "bench_turkish.py",
    "bench_backup.py",
    "bench_binary.py",
    "bench_edge_memory.py",
]


def main() -> int:
    failed = []
    for name in ORDER:
        print(f"\n=== {name} ===", flush=True)
        if subprocess.run([sys.executable, str(HERE / name)], check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
