"""Choosing an account for a command, and finding a key by its prefix."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from appliance.accounts import (
    AccountChoice,
    KeyChoice,
    account_for_key,
    add_key,
    choose_account,
    create_account,
    find_key,
    revoke_key,
)
from appliance.store import Store
from tests.harness import run_cli


def test_the_only_account_is_chosen_several_need_a_name_and_none_is_never_made(
        store: Store) -> None:
    with pytest.raises(AccountChoice, match="no account yet"):
        store.readers.call(lambda c: choose_account(c))
    acme, acme_key = store.writer.call(lambda c: create_account(c, "acme", 0))
    assert store.readers.call(lambda c: choose_account(c)) == acme
    store.writer.call(lambda c: create_account(c, "beta", 0))
    with pytest.raises(AccountChoice, match=r"2 accounts \(acme, beta\)"):
        store.readers.call(lambda c: choose_account(c))
    assert store.readers.call(lambda c: choose_account(c, "acme")) == acme
    assert store.readers.call(lambda c: choose_account(c, key=acme_key)) == acme
    with pytest.raises(AccountChoice, match="accounts are: acme, beta"):
        store.readers.call(lambda c: choose_account(c, "default"))
    names = store.readers.call(lambda c: [r[0] for r in c.execute("SELECT name FROM accounts")])
    assert sorted(names) == ["acme", "beta"]


def test_a_key_is_found_by_its_prefix_or_whole_and_refused_once_revoked(store: Store) -> None:
    acme, first = store.writer.call(lambda c: create_account(c, "acme", 0))
    second = store.writer.call(lambda c: add_key(c, acme.id, 1))
    found = store.readers.call(lambda c: find_key(c, second[:8]))
    assert found.prefix == second[:8] and found.account_name == "acme"
    assert store.readers.call(lambda c: find_key(c, first)).prefix == first[:8]
    with pytest.raises(KeyChoice, match="keys start with"):
        store.readers.call(lambda c: find_key(c, "apl_"))
    with pytest.raises(KeyChoice, match="no key starts"):
        store.readers.call(lambda c: find_key(c, "apl_%"))
    assert store.writer.call(lambda c: revoke_key(c, found.id, 2)) is True
    assert store.writer.call(lambda c: revoke_key(c, found.id, 3)) is False
    assert store.readers.call(lambda c: account_for_key(c, second)) is None
    assert store.readers.call(lambda c: account_for_key(c, first)) == acme


def test_a_prefix_as_listed_or_longer_than_kept_finds_the_key(store: Store) -> None:
    acme, first = store.writer.call(lambda c: create_account(c, "acme", 0))
    second = store.writer.call(lambda c: add_key(c, acme.id, 1))
    for given in (first[:8] + "…", first[:8] + "...", first[:12], first[:-1]):
        assert store.readers.call(functools.partial(find_key, given=given)
                                  ).prefix == first[:8], given
    with pytest.raises(KeyChoice, match="no key matches"):
        store.readers.call(lambda c: find_key(c, first + "x"))
    # Two keys of one account: --account cannot tell them apart, so it is not offered.
    with pytest.raises(KeyChoice) as one_account:
        store.readers.call(lambda c: find_key(c, "apl_"))
    assert "--account" not in str(one_account.value)
    assert "the whole key" in str(one_account.value) and second[:8] in str(one_account.value)
    store.writer.call(lambda c: create_account(c, "beta", 2))
    with pytest.raises(KeyChoice, match="--account NAME"):
        store.readers.call(lambda c: find_key(c, "apl_"))


def test_key_revoke_takes_what_key_list_shows(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    first = run_cli("account", "create", "acme", "--data-dir", data).stdout.split()[-1]
    second = run_cli("key", "create", "--data-dir", data).stdout.split()[-1]
    listed = run_cli("key", "list", "--data-dir", data).stdout.split()
    shown = [word for word in listed if word.endswith("…")]
    assert shown == [second[:8] + "…", first[:8] + "…"]
    done = run_cli("key", "revoke", shown[0], "--data-dir", data)
    assert f"revoked key {second[:8]}…" in done.stdout
    longer = run_cli("key", "revoke", first[:14], "--data-dir", data)
    assert f"revoked key {first[:8]}…" in longer.stdout
    both = run_cli("key", "revoke", "apl_", "--data-dir", data, check=False)
    assert both.returncode == 1 and "--account" not in both.stderr, both.stderr


def test_user_create_uses_the_only_account_makes_default_when_none_and_refuses_several(
        tmp_path: Path) -> None:
    def user(data: str, name: str) -> Any:
        return run_cli("user", "create", name, "--password", "long enough password",
                       "--data-dir", data, check=False)

    empty = str(tmp_path / "empty")
    made = user(empty, "alice")
    assert made.returncode == 0 and "in account default" in made.stdout, made.stderr

    one = str(tmp_path / "one")
    run_cli("account", "create", "acme", "--data-dir", one)
    made = user(one, "bob")
    assert made.returncode == 0 and "in account acme" in made.stdout, made.stderr
    # Nothing was made beside it: the commands that act for the only account still do.
    assert run_cli("key", "list", "--data-dir", one).returncode == 0

    several = str(tmp_path / "several")
    run_cli("account", "create", "acme", "--data-dir", several)
    run_cli("account", "create", "beta", "--data-dir", several)
    refused = user(several, "carol")
    assert refused.returncode == 1
    assert "2 accounts (acme, beta)" in refused.stderr and "--account" in refused.stderr
    named = run_cli("user", "create", "carol", "--password", "long enough password",
                    "--account", "beta", "--data-dir", several)
    assert "in account beta" in named.stdout
