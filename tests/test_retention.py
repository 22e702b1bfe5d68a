"""Retention through a real server whose clock the test moves (IMP-10, DLR-12)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import FileClock, Server, create_account, db_rows, wait_for
from tests.imports.test_import_api import submit_text, wait_done

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000


def test_payloads_then_jobs_are_pruned_by_age_and_contacts_stay(
        data_dir: Path, tmp_path: Path) -> None:
    clock = FileClock(tmp_path / "clock", T0)
    srv = Server(data_dir, env=clock.env).start()
    try:
        key = create_account(data_dir)
        with srv.client(key) as api:
            old = submit_text(api, "+905321234567\nnot a number\n", list_name="l").json()["jobId"]
            wait_done(api, old)
            clock.advance(6 * DAY)
            young = submit_text(api, "+905321234568\n", list_name="l").json()["jobId"]
            wait_done(api, young)

            clock.advance(2 * DAY)  # old payload is 8 days old, young is 2
            srv.terminate()
            srv.restart()  # retention runs at start, then every minute
            wait_for(lambda: api.get(f"/api/jobs/{old}").json()["payload_pruned"], 30,
                     interval=0.1, message="old payload pruned")
            assert api.get(f"/api/jobs/{young}").json()["payload_pruned"] is False
            # IMP-11: a pruned payload cannot be re-run; the answer says when it went.
            gone = api.post(f"/api/jobs/{old}/rerun")
            assert gone.status_code == 410
            assert gone.json()["pruned_at"] == "2026-01-09T00:00:00.000Z"
            old_job = api.get(f"/api/jobs/{old}").json()
            assert (old_job["inserted"], old_job["rejected"]) == (1, 1)  # the summary stays
            assert api.get(f"/api/jobs/{old}/rejects.csv").text.count("\n") == 2
            payloads = db_rows(data_dir, "SELECT job_id FROM import_payloads ORDER BY job_id")
            assert payloads == [(young,)]

            clock.advance(90 * DAY)  # past the job retention (90 days) for both
            srv.terminate()
            srv.restart()
            wait_for(lambda: api.get(f"/api/jobs/{young}").status_code == 404, 30,
                     interval=0.1, message="jobs pruned")
            assert api.get(f"/api/jobs/{old}").status_code == 404
            assert db_rows(data_dir, "SELECT count(*) FROM import_rejects") == [(0,)]
            assert api.get("/api/lists/l").json()["contacts"] == 2  # contacts are not pruned
    finally:
        srv.stop()


def test_the_retention_loop_runs_every_rule(tmp_path: Path) -> None:
    """Every registered rule runs in one step: an old unmatched report goes too."""
    import asyncio

    from appliance.clock import Clock
    from appliance.provider_kinds import load_settings
    from appliance.reports.apply import receive
    from appliance.retention import RULES, Retention
    from appliance.runtime import Runtime
    from tests.reports.support import report
    from tests.reports.test_cutoff_coverage import RAW

    clock = FileClock(tmp_path / "clock", T0)
    settings = load_settings(env={}, overrides={"data_dir": str(tmp_path / "d")})
    appliance = Runtime(settings, Clock(str(clock.path))).open()
    try:
        store = appliance.store
        store.writer.call(lambda c: receive(c, RAW, [report("ghost", "DELIVERED", 1)], None, T0))
        clock.advance(31 * DAY)
        retention = Retention(appliance)
        asyncio.run(retention.step())
        assert set(retention.removed) == {rule.name for rule in RULES}
        assert retention.removed["report_inbox"] == 1
        assert retention.removed["raw_reports"] == 1
        left = store.readers.call(lambda c: c.execute("SELECT count(*) FROM report_inbox")
                                  .fetchall())
        assert left == [(0,)]
    finally:
        appliance.close()
