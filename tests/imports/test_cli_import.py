"""``appliance import`` picks its account (never a new one) and re-runs jobs; ``appliance
key`` makes, lists and revokes keys, and a revoked key is refused by a running server
at once."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tests.harness import Server, create_account, run_cli
from tests.ops.load import read_db


def test_import_uses_the_only_account_and_refuses_to_guess_among_several(
        tmp_path: Path, data_dir: Path) -> None:
    listing = tmp_path / "list.csv"
    listing.write_text("+905321234567\n+905321234568\ntel:+905321234569\n")
    d = ("--data-dir", str(data_dir))
    none = run_cli("import", str(listing), "--list", "l", *d, check=False)
    assert none.returncode == 1 and "no account yet" in none.stderr
    assert read_db(data_dir, "SELECT count(*) FROM accounts") == [(0,)]  # no 'default'

    create_account(data_dir, "acme")
    one = run_cli("import", str(listing), "--list", "l", *d)
    assert "of account 'acme'" in one.stderr and "2 inserted" in one.stdout

    beta_key = create_account(data_dir, "beta")
    several = run_cli("import", str(listing), "--list", "l", *d, check=False)
    assert several.returncode == 1 and "(acme, beta)" in several.stderr
    assert "--account" in several.stderr
    wrong = run_cli("import", str(listing), "--list", "l", "--account", "default", *d,
                    check=False)
    assert wrong.returncode == 1 and "no account named 'default'" in wrong.stderr
    by_key = run_cli("import", str(listing), "--list", "l", "--key", beta_key, *d)
    assert "of account 'beta'" in by_key.stderr
    assert read_db(data_dir, "SELECT a.name, count(*) FROM contacts c JOIN lists l"
                             " ON l.id = c.list_id JOIN accounts a ON a.id = l.account_id"
                             " GROUP BY a.name ORDER BY a.name") == [("acme", 2), ("beta", 2)]

    rerun = run_cli("import", "--rerun", "1", "--list", "again", "--account", "acme", *d)
    assert "a re-run of job 1" in rerun.stderr and "2 inserted" in rerun.stdout
    assert read_db(data_dir, "SELECT max(id), count(*) FROM import_jobs WHERE rerun_of = 1"
                   ) == [(3, 1)]
    foreign = run_cli("import", "--rerun", "1", "--account", "beta", *d, check=False)
    assert foreign.returncode == 1 and "no such job" in foreign.stderr


def test_key_create_list_revoke_and_a_revoked_key_gets_401_at_once(data_dir: Path) -> None:
    first = create_account(data_dir, "acme")
    srv = Server(data_dir).start()
    d = ("--data-dir", str(data_dir))
    try:
        made = run_cli("key", "create", *d)  # the only account
        key = made.stdout.strip().splitlines()[-1]
        assert key.startswith("apl_") and key != first and "shown only once" in made.stderr
        listed = run_cli("key", "list", "--account", "acme", *d).stdout
        assert key[:8] in listed and first[:8] in listed and "active" in listed
        assert key not in listed
        with srv.client(key) as api:
            assert api.get("/api/jobs").status_code == 200
            revoked = run_cli("key", "revoke", key[:8], *d)
            assert f"revoked key {key[:8]}" in revoked.stdout
            refused = api.get("/api/jobs")  # the very next request
            assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        with srv.client(first) as api:
            assert api.get("/api/jobs").status_code == 200
        assert "revoked" in run_cli("key", "list", *d).stdout
        again = run_cli("key", "revoke", key, *d, check=False)
        assert again.returncode == 1 and "already revoked" in again.stderr
    finally:
        srv.stop()


def test_import_says_what_is_wrong_and_prints_a_jobs_rejects(
        tmp_path: Path, data_dir: Path) -> None:
    create_account(data_dir, "acme")
    d = ("--data-dir", str(data_dir))
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    refused = run_cli("import", str(empty), "--list", "l", *d, check=False)
    assert refused.returncode == 1 and f"the file {empty} is empty" in refused.stderr
    assert "paste" not in refused.stderr
    blank = tmp_path / "blank.csv"
    blank.write_bytes(b"\n \n")
    refused = run_cli("import", str(blank), "--list", "l", *d, check=False)
    assert "holds only blank lines" in refused.stderr

    listing = tmp_path / "list.csv"
    listing.write_text("+905321234567\nnot a number\n+905321234568\n12\n")
    unknown = run_cli("import", str(listing), "--list", "l", "--region", "XX", *d,
                      check=False)
    assert unknown.returncode == 1 and "'XX' is not a known region" in unknown.stderr
    assert "not a two-letter" not in unknown.stderr

    done = run_cli("import", str(listing), "--list", "l", *d)
    assert "2 rejected" in done.stdout and "appliance import --rejects 1" in done.stderr
    rejects = run_cli("import", "--rejects", "1", *d)
    rows = list(csv.reader(io.StringIO(rejects.stdout)))
    assert rows[0] == ["line_number", "line", "reason"]
    assert [(r[0], r[1]) for r in rows[1:]] == [("2", "not a number"), ("4", "12")]

    missing = run_cli("import", "--rejects", "99", *d, check=False)
    assert missing.returncode == 1 and "no such job 99" in missing.stderr
    rerun = run_cli("import", "--rerun", "99", *d, check=False)
    assert rerun.returncode == 1 and "no such job 99" in rerun.stderr
    mixed = run_cli("import", str(listing), "--rejects", "1", *d, check=False)
    assert mixed.returncode == 1 and "--rejects JOB takes no FILE" in mixed.stderr
