"""EDGE-4: a full disk does not flood the log (a real 30 MB tmpfs under the data dir).

Every write request is refused ``503 not_stored`` while the disk is full; each used to
log a line (a callback's with its traceback). They are summed up as ``unknown report``
is: the first of each 10 s per route in full, the rest counted in one summary line, and
the counts add up to every refusal.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.edge.support import edge_config, signed_callback
from tests.edge.test_disk_full import fill, small_disk  # noqa: F401 - the fixture
from tests.harness import Server, create_account, wait_for

REQUESTS = 150


def not_stored_lines(log: str) -> list[dict[str, object]]:
    out = []
    for line in log.splitlines():
        if line.startswith("{") and '"not stored"' in line:
            data = json.loads(line)
            if data.get("msg") == "not stored" and data.get("level") == "error":
                out.append(data)
    return out


def test_a_full_disk_sums_up_its_refusals_in_the_log(
        small_disk: Path, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    srv = Server(small_disk, config=edge_config(tmp_path / "edge.toml"))
    srv.start()
    ballast = small_disk / "ballast"
    try:
        key = create_account(small_disk)
        with srv.client(key) as api:
            fill(ballast, 0)
            lines_before = len(srv.log().splitlines())
            refused = {"callbacks": 0, "messages": 0}
            for i in range(REQUESTS):
                if signed_callback(api, f"FULL{i:012d}").status_code == 503:
                    refused["callbacks"] += 1
                sent = api.post("/api/messages", json={"to": "+905321234567", "body": "x"})
                if sent.status_code == 503:
                    assert sent.json()["error"] == "not_stored"
                    refused["messages"] += 1
            assert refused["callbacks"] > REQUESTS // 2, "the disk was never full"
            assert refused["messages"] > REQUESTS // 2, "the disk was never full"
            flood = srv.log().splitlines()[lines_before:]
            # Without sampling: one line (a callback's with a traceback) per refusal.
            assert len(flood) < 40, "\n".join(flood[:20])
            assert not any("Traceback" in line for line in flood)

            # The summaries come when each route's interval ends: every refusal counted.
            def counted() -> dict[str, int] | None:
                per_route: dict[str, int] = {}
                for data in not_stored_lines(srv.log()):
                    route = str(data["route"])
                    per_route[route] = per_route.get(route, 0) + int(str(data["count"]))
                want = {"/callbacks/{provider}": refused["callbacks"],
                        "/api/messages": refused["messages"]}
                return per_route if per_route == want else None

            wait_for(counted, 25, interval=0.25, message="the summary lines")
    finally:
        srv.stop()
        ballast.unlink(missing_ok=True)
