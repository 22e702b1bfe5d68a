"""Choosing an account for a command, and finding a key by its prefix."""

from __future__ import annotations

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
