"""Browsing, searching and deleting a list's contacts in a real store."""

from __future__ import annotations

import apsw
import pytest

from appliance.imports import contact_lists as cl
from appliance.imports.import_job import ListBeingDeleted, NewJob, create_job, ensure_list
from appliance.store import Store
from tests.reports.support import add_account


def _list_with(store: Store, count: int) -> tuple[int, int]:
    acct = store.writer.call(add_account)

    def unit(c: apsw.Connection) -> int:
        list_id = ensure_list(c, acct, "people", 0)
        for i in range(count):
            c.execute("INSERT INTO contacts (list_id, msisdn, name, created_at)"
                      " VALUES (?, ?, ?, 0)", (list_id, f"+9053212{i:05d}",
                                               "Ayşe" if i == 7 else None))
        return list_id

    return acct, store.writer.call(unit)


def test_browse_pages_by_id_and_search_finds_numbers_and_names(store: Store) -> None:
    _, list_id = _list_with(store, 250)
    first = store.readers.call(lambda c: cl.browse(c, list_id, 0, 100))
    second = store.readers.call(lambda c: cl.browse(c, list_id, first[-1].id, 100))
    assert len(first) == len(second) == 100 and first[-1].id < second[0].id
    exact = store.readers.call(lambda c: cl.browse(c, list_id, msisdn="+905321200042"))
    assert [x.msisdn for x in exact] == ["+905321200042"]
    digits = store.readers.call(lambda c: cl.browse(c, list_id, text="120 004"))
    assert {x.msisdn for x in digits} == {f"+90532120004{i}" for i in range(10)}
    assert [x.name for x in store.readers.call(lambda c: cl.browse(c, list_id, text="ayş"))
            ] == ["Ayşe"]
    assert store.readers.call(lambda c: cl.browse(c, list_id, text="%")) == []


def test_deleting_a_list_states_its_count_refuses_a_stale_one_and_comes_back_empty(
        store: Store) -> None:
    acct, list_id = _list_with(store, 12)
    with pytest.raises(cl.ListChanged) as changed:
        store.writer.call(lambda c: cl.mark_deleted(c, acct, list_id, 10, 1))
    assert changed.value.contacts == 12
    assert store.writer.call(lambda c: cl.mark_deleted(c, acct, list_id, 12, 1)) == 12
    assert store.readers.call(lambda c: cl.get_list(c, acct, list_id)) is None
    # Contacts still there (the deletion stopped halfway): the name cannot take an import.
    new = NewJob(acct, "people", "TR", "k", b"+905321234567\n", "text/plain", 1)
    with pytest.raises(ListBeingDeleted):
        store.writer.call(lambda c: create_job(c, new, 2))
    assert store.writer.call(lambda c: cl.delete_some_contacts(c, list_id, 5)) == 5
    while store.writer.call(lambda c: cl.delete_some_contacts(c, list_id, 5)):
        pass
    job, _ = store.writer.call(lambda c: create_job(c, new, 3))
    assert job.list_id == list_id  # the same row, alive again and empty
    info = store.readers.call(lambda c: cl.get_list(c, acct, list_id))
    assert info is not None and info.contacts == 0 and info.jobs == 1
