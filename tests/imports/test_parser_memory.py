"""What a large import costs in memory: the payload read a piece at a time gives
exactly what the whole text gives, a parser process loads nothing of the server's,
and the number of parser processes follows the memory the machine allows."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.config.sections import ImportSettings
from appliance.imports.lines import PayloadEncodingError, decode_payload, iter_lines
from appliance.imports.parse_process import PROCESS_MIN_LINES, ChildParser
from appliance.imports.parser_budget import PARSER_MB, SERVER_MB, parser_processes
from appliance.imports.payload_stream import ReadPiece, StreamedText, check_payload
from appliance.imports.windows import ParsedChunk, PayloadGone, Request, parts_of
from appliance.store import Store
from tests.harness import Server, create_account, db_rows, wait_for
from tests.imports.corpus import make_corpus
from tests.imports.test_windows import in_turn, new_job

LINE = st.text(alphabet=st.sampled_from(list("0123456789 +,;\t\"aşİ€😀")), max_size=14)
ENDING = st.sampled_from(["\n", "\r\n", "\r"])


def reader(data: bytes) -> tuple[ReadPiece, int]:
    return (lambda offset, size: data[offset:offset + size]), len(data)


def all_parts(request: Request, source: str | StreamedText, stride: int) -> list[ParsedChunk]:
    return in_turn([parts_of(replace(request, stride=stride, phase=k), source)
                    for k in range(stride)])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(LINE, ENDING), max_size=40), st.booleans(),
       st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]), st.integers(1, 9),
       st.integers(1, 3), st.integers(1, 7))
def test_the_payload_read_in_pieces_gives_the_parts_the_whole_text_gives(
        lines: list[tuple[str, str]], last_ending: bool, codec: str, piece: int, stride: int,
        window: int) -> None:
    text = "".join(line + ending for line, ending in lines)
    if lines and not last_ending:
        text = text[:-len(lines[-1][1])]
    data = text.encode(codec)
    whole = decode_payload(data)
    total = sum(1 for _ in iter_lines(whole))
    request = Request(0, 1, "TR", 0, 0, 0, 2, total, window)
    expected = all_parts(request, whole, stride)
    read, size = reader(data)
    # Each parser with its own stream, as each process has, in pieces of a few bytes:
    # endings (CRLF), UTF-8 sequences and UTF-16 pairs are cut between pieces.
    streams = [parts_of(replace(request, stride=stride, phase=k),
                        StreamedText(read, size, piece))
               for k in range(stride)]
    assert in_turn(streams) == expected


def test_a_stream_resumes_at_a_part_way_position_and_goes_back_for_an_earlier_one() -> None:
    corpus = make_corpus(3_000, seed=5, bare_share=0.0)
    text = corpus.text("\r\n")
    data = text.encode()
    request = Request(0, 1, "TR", 0, 0, 0, 50, corpus.total, 400)
    parts = list(parts_of(request, text))
    middle = next(p for p in parts if p.last and p.to_processed > 1_000)
    later = replace(request, line=middle.to_processed, offset=middle.to_offset, entries_seen=1)
    read, size = reader(data)
    stream = StreamedText(read, size, 4096)
    assert list(parts_of(later, stream)) == list(parts_of(later, text))
    assert list(parts_of(request, stream)) == parts  # back to the start: read again
    assert stream.base > 0 and len(stream.text) < len(text) // 2  # never all of it


@pytest.mark.parametrize("data", [b"0532\n\xff\n", b"\xef\xbb\xbf05\n\xc3", b"\xff\xfe\x00\xd8",
                                  b"ok\n" * 1000 + b"\xe2\x82"])
def test_a_payload_that_is_not_text_is_refused_at_the_byte_decode_payload_names(
        data: bytes) -> None:
    with pytest.raises(PayloadEncodingError) as whole:
        decode_payload(data)
    read, size = reader(data)
    with pytest.raises(PayloadEncodingError) as pieces:
        check_payload(read, size, 3)
    assert (pieces.value.offset, str(pieces.value)) == (whole.value.offset, str(whole.value))


# ---------------------------------------------------------------------------
# How many parsers: the cores, then the memory.

def cgroup_v2(tmp: Path, limits: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup v2 tree with ``memory.max`` at the given paths, and a /proc/self/cgroup
    placing the process in its deepest one."""
    root = tmp / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory\n")
    for where, limit in limits.items():
        folder = root / where.strip("/") if where.strip("/") else root
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "memory.max").write_text(limit + "\n")
    proc = tmp / "proc-cgroup"
    proc.write_text(f"0::{max(limits, key=len)}\n")
    return root, proc


def test_the_parsers_follow_the_cgroup_v2_limit_the_lowest_along_the_path(
        tmp_path: Path) -> None:
    mb = 1024 * 1024
    two = SERVER_MB + 2 * PARSER_MB
    root, proc = cgroup_v2(tmp_path, {"/app": str(two * mb), "/app/serve": "max"})
    assert parser_processes(ImportSettings(parser_processes=2), root, proc) == 2
    (root / "app" / "serve" / "memory.max").write_text(f"{(two - 1) * mb}\n")
    assert parser_processes(ImportSettings(parser_processes=2), root, proc) == 1
    (root / "app" / "memory.max").write_text(f"{(SERVER_MB + PARSER_MB - 1) * mb}\n")
    assert parser_processes(ImportSettings(parser_processes=2), root, proc) == 0


def test_the_parsers_follow_a_cgroup_v1_limit_and_no_limit_leaves_the_cores(
        tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "memory" / "box").mkdir(parents=True)
    proc = tmp_path / "proc-cgroup"
    proc.write_text("4:memory:/box\n0::/\n")
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # none
    assert parser_processes(ImportSettings(parser_processes=2), root, proc) == 2
    (root / "memory" / "box" / "memory.limit_in_bytes").write_text(
        f"{(SERVER_MB + PARSER_MB) * 1024 * 1024}\n")
    assert parser_processes(ImportSettings(parser_processes=2), root, proc) == 1
    # The setting stands for a limit where there is no cgroup to read.
    assert parser_processes(ImportSettings(parser_processes=2, memory_limit_mb=SERVER_MB),
                            tmp_path / "none", tmp_path / "none") == 0


@pytest.mark.slow
def test_with_no_memory_for_a_parser_a_large_import_is_parsed_in_the_server_exactly(
        data_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "appliance.toml"
    config.write_text(f"[import]\nmemory_limit_mb = {SERVER_MB + PARSER_MB - 1}\n")
    corpus = make_corpus(PROCESS_MIN_LINES + 5_000, seed=31)
    srv = Server(data_dir, config=config).start()
    try:
        key = create_account(data_dir)
        with srv.client(key) as api:
            job_id = api.post("/api/contacts/import?list=small-box",
                              content=corpus.text().encode(),
                              headers={"Content-Type": "text/plain"}).json()["jobId"]
            job = wait_for(lambda: (lambda j: j if j["state"] == "DONE" else None)(
                api.get(f"/api/jobs/{job_id}").json()), 120, interval=0.05,
                message="the import to finish")
        assert srv.proc is not None
        children = Path(f"/proc/{srv.proc.pid}/task/{srv.proc.pid}/children").read_text()
    finally:
        srv.stop()
    assert "import parser process started" not in srv.log()
    assert children.split() == []
    assert (job["processed"], job["inserted"], job["duplicates_in_paste"], job["rejected"]) == (
        corpus.total, corpus.inserted, corpus.duplicates_in_paste, len(corpus.rejected_lines))
    assert db_rows(data_dir, "SELECT count(*) FROM contacts")[0][0] == corpus.inserted


# ---------------------------------------------------------------------------
# What a parser process loads.

SERVER_ONLY = ("anyio", "starlette", "uvicorn", "uvloop", "httptools", "httpx", "aiohttp",
               "click", "jinja2", "psycopg", "appliance.web", "appliance.runtime",
               "appliance.store", "appliance.config", "appliance.cli", "appliance.sending",
               "appliance.reports")


def test_the_parser_module_imports_nothing_of_the_server() -> None:
    """What a spawned parser imports: the spawn machinery, the target's module, and the
    classes it is sent (a request, parts, errors)."""
    program = (
        "import sys, pickle, multiprocessing.spawn, multiprocessing.connection\n"
        "import appliance.imports.parser_child\n"
        "from appliance.imports.windows import Request\n"
        "pickle.loads(pickle.dumps(Request(0, 1, 'TR', 0, 0, 0, 2, 2, 2)))\n"
        "print('\\n'.join(sys.modules))\n")
    loaded = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            check=True).stdout.split()
    assert "appliance.imports.parser_child" in loaded
    found = [m for m in loaded if m.startswith(SERVER_ONLY)]
    assert found == [], f"a parser process would import {found}"


def test_a_parser_process_maps_no_web_library_and_starts_no_resource_tracker(
        store: Store, tmp_path: Path) -> None:
    corpus = make_corpus(500, seed=3)
    job = new_job(store, corpus)
    parser = ChildParser(str(tmp_path / "appliance.db"), 1)
    try:
        parser.start(Request(0, job.id, "TR", 0, 0, 0, 100, corpus.total, 200))
        part = parser._get()
        assert isinstance(part, ParsedChunk) and part.to_processed == 200
        pid = parser._children[0].proc.pid
        assert pid is not None
        maps = Path(f"/proc/{pid}/maps").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        parser.start(Request(0, job.id + 1, "TR", 0, 0, 0, 100, 10, 200))
        assert isinstance(parser._get(), PayloadGone)
    finally:
        parser.close()
    libraries = {line.split("/")[-1] for line in maps.splitlines() if ".so" in line}
    assert not [so for so in libraries if so.startswith(("loop.", "parser.", "_psycopg",
                                                         "_http_parser", "_websocket"))]
    assert "spawn_main(pipe_handle=" in command and "tracker_fd" not in command
