"""A large import read in windows: each window's numbers sorted and sent in parts, the
windows shared between parser processes, a window part-way resumed with only the parts
not in yet, and each part applied once, where the job is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.imports.apply_window import apply_parsed
from appliance.imports.import_job import (
    ImportJob,
    JobMoved,
    NewJob,
    create_job,
    get_job,
)
from appliance.imports.lines import iter_lines, skip_lines
from appliance.imports.parser_budget import parser_processes
from appliance.imports.windows import ParsedChunk, Request, parts_of
from appliance.store import Store
from tests.harness import Server, create_account, wait_for
from tests.imports.corpus import Corpus, make_corpus, make_numbers
from tests.reports.support import add_account

CHUNK = 50
WINDOW = 400


def request(corpus: Corpus, **changes: object) -> Request:
    base = Request(0, 1, "TR", 0, 0, 0, CHUNK, corpus.total, WINDOW)
    return replace(base, **changes)  # type: ignore[arg-type]


def in_turn(streams: list[Iterator[ParsedChunk]]) -> list[ParsedChunk]:
    """The parts of several parsers as the server takes them: a window from each in
    turn."""
    out: list[ParsedChunk] = []
    turn = 0
    while True:
        part = next(streams[turn], None)
        if part is None:
            return out
        out.append(part)
        if part.last:
            turn = (turn + 1) % len(streams)


def outcome(parts: list[ParsedChunk]) -> dict[str, object]:
    windows = [p for p in parts if p.last]
    return {
        "lines": sum(len(p.contacts) + sum(p.repeats) + len(p.rejects) + p.blank + p.header
                     for p in parts),
        "numbers": {m for p in parts for m, _ in p.contacts},
        "rejects": [r[0] for p in windows for r in p.rejects],
        "blank": sum(p.blank for p in windows),
        "header": sum(p.header for p in windows),
    }


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return make_corpus(3_000, seed=5)


def test_one_parser_covers_the_text_in_windows_of_sorted_parts(corpus: Corpus) -> None:
    text = corpus.text("\r\n")
    parts = list(parts_of(request(corpus), text))
    got = outcome(parts)
    assert got["lines"] == corpus.total
    assert got["numbers"] == corpus.distinct
    assert got["rejects"] == corpus.rejected_lines
    assert (got["blank"], got["header"]) == (corpus.blank, corpus.header)
    window_from, done = 0, 0
    for part in parts:  # each part starts where the one before ended
        assert (part.from_processed, part.done_before) == (window_from, done)
        assert part.to_processed - part.from_processed <= WINDOW
        numbers = [m for m, _ in part.contacts]
        assert numbers == sorted(numbers) and len(numbers) <= CHUNK
        window_from, done = ((part.to_processed, 0) if part.last
                             else (window_from, done + len(numbers)))
    assert window_from == corpus.total
    assert sum(1 for p in parts if p.last) == -(-corpus.total // WINDOW)


@pytest.mark.parametrize("processes", [2, 3])
def test_parsers_taking_windows_in_turn_give_what_one_gives(corpus: Corpus,
                                                            processes: int) -> None:
    text = corpus.text()
    alone = list(parts_of(request(corpus), text))
    shared = in_turn([parts_of(request(corpus, stride=processes, phase=i), text)
                      for i in range(processes)])
    assert shared == alone


NUMBERS = [f"0532 {i:03d} 45 67,Ayşe" for i in range(100, 300)]


@pytest.mark.parametrize(("lines", "headers", "rejected"), [
    # The first window all blank: the header is the next parser's first entry.
    ([""] * (WINDOW + 12) + ["phone,name"] + NUMBERS, 1, 0),
    # A header-looking line that opens the second window is data, not a header.
    (["phone,name", *(NUMBERS * 2)[:WINDOW - 1], "telefon,ad", *NUMBERS], 1, 1),
], ids=["blank-window-then-header", "header-like-line-later"])
def test_only_the_first_entry_of_the_job_can_be_a_header(lines: list[str], headers: int,
                                                         rejected: int) -> None:
    text = "\n".join(lines) + "\n"
    base = Request(0, 1, "TR", 0, 0, 0, CHUNK, len(lines), WINDOW)
    alone = list(parts_of(base, text))
    shared = in_turn([parts_of(replace(base, stride=2, phase=i), text) for i in range(2)])
    assert shared == alone
    assert sum(p.header for p in alone) == headers
    assert len([r for p in alone for r in p.rejects]) == rejected


def test_a_window_part_way_resumes_with_only_the_parts_not_in(corpus: Corpus) -> None:
    text = corpus.text()
    parts = list(parts_of(request(corpus), text))
    # The second window, stopped after its first two parts.
    starts = [i for i, p in enumerate(parts) if p.done_before == 0]
    first, following = starts[1], starts[2]
    assert following - first >= 3
    previous = parts[first - 1]
    resumed = list(parts_of(request(corpus, line=previous.to_processed,
                                    offset=previous.to_offset, entries_seen=1,
                                    first_to=parts[first].to_processed,
                                    skip=parts[first + 2].done_before), text))
    assert resumed == parts[first + 2:]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab \r\n", max_size=60), st.integers(0, 12), st.integers(0, 12))
def test_skip_lines_lands_where_iter_lines_does(text: str, start: int, count: int) -> None:
    positions = [(0, 0)] + [(line.number, after) for line, after in iter_lines(text)]
    line, offset = positions[min(start, len(positions) - 1)]
    expected = positions[min(positions.index((line, offset)) + count, len(positions) - 1)]
    assert skip_lines(text, line, offset, count) == expected


# ---------------------------------------------------------------------------
# Applying parts.

def new_job(store: Store, corpus: Corpus) -> ImportJob:
    account_id = store.writer.call(add_account)
    new = NewJob(account_id, "big", "TR", "key-1", corpus.text().encode(), "text/plain",
                 corpus.total)
    job, created = store.writer.call(lambda c: create_job(c, new, 1))
    assert created
    return job


def apply(store: Store, part: ParsedChunk, job_id: int) -> ImportJob:
    return store.writer.call(lambda c: apply_parsed(c, replace(part, job_id=job_id), 2))


def test_parts_applied_in_order_give_the_exact_counts(store: Store, corpus: Corpus) -> None:
    job = new_job(store, corpus)
    for part in parts_of(request(corpus), corpus.text()):
        job = apply(store, part, job.id)
        if not part.last:  # part-way: the window is kept on the job, progress moves
            assert job.window_to == part.to_processed
            assert job.window_done == part.done_before + len(part.contacts)
            assert job.resume_line == part.from_processed
    assert job.state == "DONE"
    assert (job.processed, job.window_to, job.window_done, job.window_lines) == (
        corpus.total, None, 0, 0)
    assert (job.inserted, job.duplicates_in_paste, job.rejected, job.blank,
            job.header_skipped) == (corpus.inserted, corpus.duplicates_in_paste,
                                    len(corpus.rejected_lines), corpus.blank, corpus.header)
    count = store.readers.call(lambda c: c.execute(
        "SELECT count(*) FROM contacts WHERE job_id = ?", (job.id,)).fetchall())
    assert count == [(corpus.inserted,)]


def test_a_part_applied_twice_or_out_of_turn_writes_nothing(store: Store,
                                                            corpus: Corpus) -> None:
    job = new_job(store, corpus)
    parts = list(parts_of(request(corpus), corpus.text()))
    after_first = apply(store, parts[0], job.id)
    for wrong in (parts[0], parts[2], replace(parts[1], to_processed=parts[1].to_processed + 1)):
        with pytest.raises(JobMoved):
            apply(store, wrong, job.id)
        assert get_job_now(store, job.id) == after_first
    assert apply(store, parts[1], job.id).window_done == parts[2].done_before


def get_job_now(store: Store, job_id: int) -> ImportJob | None:
    return store.readers.call(lambda c: get_job(c, job_id))



def memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for process {pid}")


def test_a_large_paste_is_accepted_without_copies_of_it_in_memory(data_dir: Path) -> None:
    """The accept holds a plain-text paste as the pieces it came in and writes them into
    a zeroblob: the server's peak grows by the pieces and the pages written (the
    writer's cache), not by copies of the whole (SQLite made two, the zeros and the
    record, while ``body`` was not the row's last column)."""
    numbers = make_numbers(400_000, seed=9)
    body = "".join(f"{n},Ayşe Yılmaz\n" for n in numbers).encode()  # ~11 MB
    srv = Server(data_dir).start()
    try:
        key = create_account(data_dir)
        assert srv.proc is not None
        Path(f"/proc/{srv.proc.pid}/clear_refs").write_text("5")  # the peak starts again
        before = memory_mb(srv.proc.pid, "VmRSS")
        with srv.client(key) as api:
            resp = api.post("/api/contacts/import?list=big", content=body,
                            headers={"Content-Type": "text/plain"})
            assert resp.status_code == 202, resp.text
            api.post(f"/api/jobs/{resp.json()['jobId']}/cancel")
        grown = memory_mb(srv.proc.pid, "VmHWM") - before
    finally:
        srv.stop()
    size = len(body) / 2**20
    assert grown < 3 * size, f"the accept of {size:.0f} MB grew the server by {grown:.0f} MB"


@pytest.mark.slow
def test_the_parser_processes_give_the_text_back_when_the_import_ends(data_dir: Path) -> None:
    """Each parser process holds a window of the payload's text and that window's
    numbers while it parses; once the job is done, that memory goes back to the system,
    not kept until the next import."""
    corpus = make_corpus(200_000, seed=12, bare_share=0.0)
    body = corpus.text().encode()
    srv = Server(data_dir).start()
    try:
        key = create_account(data_dir)
        with srv.client(key) as api:
            job_id = api.post("/api/contacts/import?list=big", content=body,
                              headers={"Content-Type": "text/plain"}).json()["jobId"]
            wait_for(lambda: api.get(f"/api/jobs/{job_id}").json()["state"] == "DONE", 120,
                     interval=0.05, message="the import to finish")
        pids = [int(json.loads(line)["pid"]) for line in srv.log().splitlines()
                if "import parser process started" in line]
        assert len(pids) == parser_processes()
        text_mb = 2 * len(body) / 2**20

        def given_back() -> bool:
            return all(memory_mb(pid, "VmRSS") < memory_mb(pid, "VmHWM") - text_mb / 2
                       for pid in pids)

        wait_for(given_back, 20, interval=0.1, message="the parsers' memory to go back")
    finally:
        srv.stop()
