"""SIGTERM, one server per data dir, and configuration errors at start."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness import Server, appliance_cmd, create_account, free_port, run_cli, wait_for
from tests.ops.load import ReportFlood, numbers, read_db
from tests.reports.support import http_provider_config


@pytest.mark.slow
def test_sigterm_during_an_import_exits_0_and_the_restart_finishes_it(data_dir: Path) -> None:
    srv = Server(data_dir, env={"APPLIANCE_IMPORT_CHUNK_LINES": "500"}).start()
    key = create_account(data_dir)
    total = 60_000
    try:
        with srv.client(key) as api:
            job = int(api.post("/api/contacts/import", json={
                "list": "big", "text": numbers(0, total)}).json()["jobId"])
            seen = wait_for(lambda: (lambda p: p if 0 < p < total // 2 else None)(
                int(api.get(f"/api/jobs/{job}").json()["processed"])), 60, interval=0.005,
                message="the import under way")
        started = time.monotonic()
        assert srv.terminate(timeout=30) == 0
        assert time.monotonic() - started < 20  # shutdown_timeout_s
        assert "stopped cleanly" in srv.log()
        processed, state = read_db(data_dir, "SELECT processed, state FROM import_jobs")[0]
        assert seen <= processed < total and state == "RUNNING"
        # Position and rows were committed together: nothing half-written.
        assert read_db(data_dir, "SELECT count(*) FROM contacts")[0][0] == processed
        srv.restart()
        with srv.client(key) as api:
            done = wait_for(lambda: (lambda j: j if j["state"] == "DONE" else None)(
                api.get(f"/api/jobs/{job}").json()), 120, message="the import to finish")
    finally:
        srv.stop()
    assert done["processed"] == done["total"] == total == done["inserted"]
    assert read_db(data_dir, "SELECT count(*), count(DISTINCT msisdn) FROM contacts")[0] == (
        total, total)


@pytest.mark.slow
def test_sigterm_during_a_report_flood_loses_no_acknowledged_report(
        tmp_path: Path, data_dir: Path) -> None:
    config = http_provider_config(tmp_path / "appliance.toml")
    srv = Server(data_dir, config=config).start()
    flood = ReportFlood(srv, threads=6).start()
    try:
        wait_for(lambda: flood.count() > 500, 30, message="the flood to build up")
        assert srv.terminate(timeout=30) == 0
    finally:
        flood.stop()
    acked = {ref for _, ref in flood.acked}
    stored = {str(r[0]) for r in read_db(data_dir, "SELECT ref FROM report_inbox")}
    assert acked <= stored, f"{len(acked - stored)} acknowledged reports lost"
    assert "stopped cleanly" in srv.log()
    srv.restart()
    try:
        assert srv.client().get("/readyz").status_code == 200
        flood2 = ReportFlood(srv, threads=2).start()
        wait_for(lambda: flood2.count() > 20, 30, message="reports after the restart")
        flood2.stop()
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.serial  # times itself: run alone (Makefile)
def test_sigterm_while_a_campaign_sends_exits_within_3_s_and_records_every_batch(
        tmp_path: Path, data_dir: Path) -> None:
    """The provider pushes its receipts before it answers (the race); stopping must not
    wait on receipts our stopped server can no longer take."""
    sim_port = free_port()
    sim_log = tmp_path / "simulator.log"
    with open(sim_log, "wb") as sim_out:
        sim = subprocess.Popen(appliance_cmd("simulator", "--port", str(sim_port),
                                             "--early-reports", "1", "--delay-max-ms", "200"),
                               stdout=sim_out, stderr=subprocess.STDOUT)
    config = tmp_path / "appliance.toml"
    config.write_text(f'[providers.sim]\nkind = "simulator"\n'
                      f'base_url = "http://127.0.0.1:{sim_port}"\nrate_per_s = 200\n')
    srv = Server(data_dir, config=config)
    try:
        wait_for(lambda: _listening(sim_port), 30, message="the simulator")
        srv.start()
        key = create_account(data_dir)
        with srv.client(key) as api:
            job = api.post("/api/contacts/import", json={"list": "c",
                                                         "text": numbers(0, 3000)}).json()
            wait_for(lambda: api.get(f"/api/jobs/{job['jobId']}").json()["state"] == "DONE",
                     30, message="the import")
            made = api.post("/api/campaigns", json={"list": "c", "body": "hi"}).json()
            wait_for(lambda: (lambda c: c["finalised"] > 200 and c["counts"].get("QUEUED"))(
                api.get(f"/api/campaigns/{made['campaignId']}").json()), 60, interval=0.1,
                message="the campaign under way")
        started = time.monotonic()
        assert srv.terminate(timeout=30) == 0
        took = time.monotonic() - started
    finally:
        srv.stop()
        sim.terminate()
        sim.wait(10)
    assert took < 3.0, took
    log = srv.log()
    assert "stopped cleanly" in log and "Traceback" not in log
    # Every batch that was in flight had its outcomes recorded before the exit.
    assert read_db(data_dir, "SELECT count(*) FROM messages WHERE state = 'SENDING'") == [(0,)]


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_second_server_on_the_same_data_dir_refuses(server: Server) -> None:
    second = subprocess.run(
        appliance_cmd("serve", "--data-dir", str(server.data_dir), "--port", "0"),
        capture_output=True, text=True, timeout=30)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 1
    assert len(lines) == 1 and "is in use by a running appliance" in lines[0], second.stderr
    assert str(server.data_dir) in lines[0]
    assert server.client().get("/healthz").status_code == 200


CONFIG_ERRORS = [
    ('port = "eighty"\n', "port: expected int, got 'eighty'"),
    ("colour = 1\n", "colour: unknown setting"),
    ("[backup]\nkeep = -1\n", "[backup] keep: must not be negative"),
    ("[import]\nmax_rows = 1.5\n", "[import] max_rows: expected int"),
    ("log_level = 'loud'\n", "log_level: 'loud' is not one of"),
    ("[providers.x]\nbase_url = 'http://h'\n", "[providers.x] kind: missing"),
    ("[providers.x]\nkind = 'carrier-pigeon'\n", "kind: 'carrier-pigeon' is not one of"),
    ("this is = = not toml\n", "not valid TOML"),
    ("[alerts\n", "not valid TOML"),
    ("[sending]\ndefault_provider = 'nope'\n", "default_provider: no provider named 'nope'"),
    ("[alerts]\nwebhook_url = 'ftp://x'\n", "webhook_url: 'ftp://x' is not an http://"),
    ("[alerts]\ncheck_interval_s = 0\n", "check_interval_s: must be more than 0"),
    ("[providers.x]\nkind = 'vonage'\napi_key = 'k'\napi_secret = 's'\n",
     "[providers.x] base_url: required for kind 'vonage'"),
    (f"public_url = 'https://{'a' * 80}.example.org'\n[providers.vg]\nkind = 'vonage'\n"
     "base_url = 'https://rest.nexmo.com'\napi_key = 'k'\napi_secret = 's'\n",
     "is 113 characters; Vonage accepts at most 100 in `callback`"),
]


@pytest.mark.parametrize(("text", "phrase"), CONFIG_ERRORS)
def test_a_bad_config_is_one_clear_line_and_exit_2(tmp_path: Path, text: str,
                                                   phrase: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    for command in (["serve"], ["config", "check"]):
        out = run_cli(*command, "--config", str(config), "--data-dir", str(tmp_path / "d"),
                      check=False, timeout=30)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, (command, out.stderr)
        assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
        assert lines[0].startswith("Error: config: ") and phrase in lines[0], lines[0]
        assert not (tmp_path / "d").exists(), "nothing is created before the config is valid"


def test_environment_and_data_dir_errors_are_one_line_too(tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("")
    cases = [
        ({"APPLIANCE_PORT": "x"}, ["serve"], "port: expected int"),
        ({"APPLIANCE_NO_SUCH": "1"}, ["serve"], "environment APPLIANCE_NO_SUCH: unknown"),
        ({}, ["serve", "--data-dir", str(afile)], "exists and is not a directory"),
        ({}, ["serve", "--data-dir", str(afile / "sub")], "is not writable"),
        ({}, ["serve", "--config", str(tmp_path / "missing.toml")], "not found"),
    ]
    for env, args, phrase in cases:
        if "--data-dir" not in args:
            args = [*args, "--data-dir", str(tmp_path / "d")]
        out = run_cli(*args, env=env, check=False, timeout=30)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, (args, out.stderr)
        assert len(lines) == 1 and phrase in lines[0], out.stderr


def test_config_check_prints_the_effective_config_with_secrets_masked(tmp_path: Path) -> None:
    config = tmp_path / "appliance.toml"
    config.write_text('port = 9000\n[providers.main]\nkind = "vonage"\n'
                      'base_url = "https://rest.nexmo.com"\n'
                      'api_key = "key-123456"\napi_secret = "very-secret-value"\n')
    out = run_cli("config", "check", "--config", str(config), "--data-dir", str(tmp_path),
                  env={"APPLIANCE_PORT": "9050", "APPLIANCE_BACKUP_KEEP": "3"})
    assert "very-secret-value" not in out.stdout and "key-123456" not in out.stdout
    shown = json.loads(out.stdout)
    assert shown["port"] == 9050  # environment beats the file
    assert shown["backup"]["keep"] == 3
    assert shown["providers"]["main"]["api_secret"] == "***"
    assert shown["data_dir"] == str(tmp_path)


def test_the_sample_config_in_packaging_is_valid(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[2] / "packaging" / "appliance.toml"
    out = run_cli("config", "check", "--config", str(sample), "--data-dir", str(tmp_path))
    shown = json.loads(out.stdout)
    assert shown["backup"]["interval_hours"] == 6.0
    assert shown["providers"]["main"]["api_secret"] == "***"
