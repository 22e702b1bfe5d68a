"""The console in a real headless Chromium against a real ``appliance serve``.

One server (with the provider simulator as its provider) serves every test here;
one browser is launched for the module. The tests take the screenshots shown in the
README; with ``APPLIANCE_UPDATE_SCREENSHOTS=1`` they are saved over
``docs/screenshots/``, otherwise into the test's temporary directory (so a test run
leaves the tree clean).
"""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from appliance.csv_export import spreadsheet_safe
from tests.harness import ROOT, Server, appliance_cmd, db_rows, free_port, wait_for
from tests.imports.corpus import make_corpus
from tests.web.console_support import PASSWORD, create_user

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
UPDATE_SHOTS = os.environ.get("APPLIANCE_UPDATE_SCREENSHOTS") == "1"
MAX_ROWS = 20_000
VIEWPORT = {"width": 1000, "height": 700}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (apt-get install"
                              " chromium; .ci/run installs it)"),
]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser")
    data_dir = base / "data"
    data_dir.mkdir()
    sim_port = free_port()
    sim_log = open(base / "simulator.log", "wb")  # noqa: SIM115 - handed to the child
    simulator = subprocess.Popen(
        appliance_cmd("simulator", "--port", str(sim_port), "--delay-min-ms", "20",
                      "--delay-max-ms", "400", "--early-reports", "0.3", "--duplicate-rate",
                      "0.3", "--reorder-rate", "0.3", "--intermediate-rate", "0.3",
                      "--seed", "5"),
        stdout=sim_log, stderr=subprocess.STDOUT)
    sim_log.close()
    config = base / "appliance.toml"
    config.write_text(
        f'[providers.sim]\nkind = "simulator"\nbase_url = "http://127.0.0.1:{sim_port}"\n'
        "rate_per_s = 500\n\n[alerts]\ncoverage_settle_hours = 0\n")
    create_user(data_dir, "alice")
    server = Server(data_dir, config=config, env={
        "APPLIANCE_IMPORT_MAX_ROWS": str(MAX_ROWS),
        "APPLIANCE_IMPORT_CHUNK_LINES": "100",
        # The test holds the write lock for a few seconds to freeze an import half way.
        "APPLIANCE_BUSY_TIMEOUT_MS": "60000",
    })
    try:
        wait_for(lambda: _port_open(sim_port), 30, message="the simulator to listen")
        server.start()
        yield server
    finally:
        server.stop()
        simulator.terminate()
        simulator.wait(10)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ROOT / "docs" / "screenshots" if UPDATE_SHOTS else tmp_path_factory.mktemp("shots")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(30_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def sign_in(page: Any, server: Server, path: str = "/import") -> None:
    page.goto(server.url + path)
    assert "/login" in page.url
    page.fill("#username", "alice")
    page.fill("#password", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(server.url + path)


def paste(page: Any, selector: str, text: str) -> None:
    """Put ``text`` in a field at once, as a paste does (typing 20,000 lines takes minutes)."""
    page.eval_on_selector(selector, "(el, v) => { el.focus(); el.value = v;"
                          " el.dispatchEvent(new Event('input', {bubbles: true})); }", text)


def count(page: Any, name: str) -> int:
    return int(re.sub(r"\D", "", page.inner_text(f"[data-count={name}]")))


def spreadsheet_cell(line: str) -> str:
    return spreadsheet_safe(line)  # every formula-like piece defused, in any locale


def reload_racing_the_page(page: Any) -> None:
    """Reload, tolerating the page's own reload when the job finishes at that moment."""
    for _ in range(3):
        try:
            page.reload()
            return
        except Exception as exc:  # playwright's Error: the navigation was superseded
            # (Chromium words it "ERR_ABORTED", "frame was detached" or "Not attached to
            # an active page", depending on the moment the page's own reload began.)
            if not any(word in str(exc) for word in ("ERR_ABORTED", "detached",
                                                      "Not attached")):
                raise
            page.wait_for_load_state()
    page.reload()


class WriterHold(threading.Thread):
    """Takes the database's write lock as soon as the next import job has committed some
    of its chunks and not all, and keeps it until ``release()``: the import stands still
    meanwhile, while every read (the page's polling) goes on.

    It watches with plain reads (which never get in the appliance's way), then spins for
    the lock: a busy handler that retries at once takes the first gap between two of the
    writer's commits, where SQLite's own handler would sleep through the whole import."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(daemon=True)
        self.db = str(data_dir / "appliance.db")
        self.after_job = int(db_rows(
            data_dir, "SELECT coalesce(max(id), 0) FROM import_jobs")[0][0])
        self.holding = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None

    def _job(self, conn: apsw.Connection) -> tuple[int, int, str, bool] | None:
        """(processed, total, state, whether a rate can be shown yet) of the job."""
        rows = list(conn.execute(
            "SELECT processed, total, state, updated_at > started_at FROM import_jobs"
            " WHERE id > ? ORDER BY id LIMIT 1", (self.after_job,)))
        return (int(rows[0][0]), int(rows[0][1]), str(rows[0][2]), bool(rows[0][3])
                ) if rows else None

    def run(self) -> None:
        conn = apsw.Connection(self.db)
        try:
            while not self.done.is_set():
                job = self._job(conn)
                if job is not None and job[0] > 0 and job[3]:
                    break
                time.sleep(0.0005)
            conn.set_busy_handler(lambda _tries: not self.done.is_set())
            conn.execute("BEGIN IMMEDIATE")
            job = self._job(conn)
            if job is not None and job[0] < job[1] and job[2] in ("DRAFT", "RUNNING"):
                self.holding.set()
            else:
                self.error = f"the import finished before it could be held: {job}"
            self.done.wait()
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    def wait_holding(self, timeout: float = 30) -> None:
        wait_for(lambda: self.holding.is_set() or self.error, timeout,
                 message="the import's first chunks")
        assert self.error is None, self.error

    def release(self) -> None:
        self.done.set()
        self.join(10)


def test_paste_20000_lines_watch_the_bar_and_download_the_rejects(
        page: Any, console: Server, shots: Path) -> None:
    corpus = make_corpus(MAX_ROWS, seed=5)
    sign_in(page, console)
    page.fill("#new_list", "customers")
    paste(page, "#text", corpus.text())
    # An import of 20,000 lines takes well under a second here, shorter than the
    # page's polling interval: freeze it half way by holding the database's write lock.
    # The page keeps answering (reads never wait for the writer) and must show it.
    held = WriterHold(console.data_dir)
    held.start()
    try:
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r"/jobs/\d+$"))
        held.wait_holding()
        bar = "[data-bar]"
        page.wait_for_function(
            "() => { const b = document.querySelector('[data-bar]');"
            " return b && b.value > 0 && b.value < b.max; }")
        page.wait_for_function("() => /\\d/.test(document.querySelector("
                               "'[data-field=rows_per_s]').textContent)")
        # The rate shown while it runs is labelled "now", the percentage printed as the
        # finished page prints it (one decimal).
        figures = page.inner_text("#job-figures")
        assert re.search(r"\(\d+\.\d %\) · now [\d\u2009–]+ rows/s", figures), figures
        page.screenshot(path=str(shots / "import-progress.png"))
        seen: list[float] = [float(page.eval_on_selector(bar, "b => b.value"))]

        # The bar survives a crash and a reload: the job lives in the appliance, not the page.
        assert page.locator("[data-job-poll]").count(), "the page stopped polling mid-import"
        console.kill9()
    finally:
        held.release()
    page.wait_for_selector("[data-poll-status]:has-text('reconnecting')")
    port = console.port
    console.restart()
    if console.port == port:  # the page finds the appliance again by itself
        page.wait_for_function(
            "() => { const s = document.querySelector('[data-poll-status]');"
            " return !s || s.textContent === ''; }")
    else:  # the old port was taken meanwhile: open the new address
        page.goto(page.url.replace(f":{port}/", f":{console.port}/"))
    reload_racing_the_page(page)
    seen.append(float(page.eval_on_selector(bar, "b => b.value")))
    while page.locator("[data-bar]").count() and "Report" not in page.inner_text("#report-title"):
        try:
            seen.append(float(page.eval_on_selector(bar, "b => b.value")))
        except Exception:  # the page reloaded itself between the two calls
            break
        page.wait_for_timeout(150)
    assert seen == sorted(seen), "the bar went backwards"

    page.wait_for_selector("#report-title:has-text('Report')", timeout=90_000)
    assert page.eval_on_selector(bar, "b => [b.value, b.max]") == [MAX_ROWS, MAX_ROWS]
    assert page.inner_text("[data-field=state]") == "DONE"
    assert count(page, "inserted") == corpus.inserted
    assert count(page, "duplicates_in_paste") == corpus.duplicates_in_paste
    assert count(page, "duplicates_in_list") == 0
    assert count(page, "rejected") == len(corpus.rejected_lines)
    assert count(page, "blank") == corpus.blank
    assert count(page, "header_skipped") == 1
    page.screenshot(path=str(shots / "import-report.png"))

    with page.expect_download() as download:
        page.click("[data-rejects]")
    path = download.value.path()
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["line_number", "line", "reason"]
    assert [int(r[0]) for r in rows[1:]] == corpus.rejected_lines
    assert [r[1] for r in rows[1:]] == [spreadsheet_cell(corpus.lines[n - 1])
                                        for n in corpus.rejected_lines]
    assert all(r[2] for r in rows[1:])

    page.goto(console.url + "/lists")
    contacts = page.inner_text("tr[data-list='customers'] [data-contacts]")
    assert int(re.sub(r"\D", "", contacts)) == len(corpus.distinct)


def test_the_same_paste_twice_opens_the_same_job(page: Any, console: Server) -> None:
    text = "\n".join(f"+90 533 {i:03d} 00 00" for i in range(50))
    sign_in(page, console)
    job_urls = []
    for _ in range(2):
        page.goto(console.url + "/import")
        page.fill("#new_list", "twice")
        paste(page, "#text", text)
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r"/jobs/\d+"))
        job_urls.append(page.url)
    assert job_urls[1] == job_urls[0] + "?again=1"
    assert "already submitted" in page.inner_text("main")
    page.goto(console.url + "/lists")
    assert page.locator("tr[data-job]", has_text="twice").count() == 1


def test_an_oversized_paste_shows_the_limit_instead_of_a_spinner(
        page: Any, console: Server) -> None:
    sign_in(page, console)
    page.fill("#new_list", "too-big")
    paste(page, "#text", "\n".join(f"+90534{i:07d}" for i in range(MAX_ROWS + 1)))
    page.click("[data-submit]")
    error = page.locator("[data-import-error]")
    error.wait_for(state="visible")
    text = error.inner_text()
    assert "20\u2009001 submitted, the limit is 20\u2009000" in text
    assert "Split the list" in text
    assert page.url == console.url + "/import"
    assert page.is_enabled("[data-submit]")
    page.goto(console.url + "/lists")
    assert "too-big" not in page.inner_text("main")


def test_a_campaign_through_the_simulator_reaches_full_coverage(
        page: Any, console: Server, shots: Path) -> None:
    numbers = [f"+90 535 {i:03d} 11 22" for i in range(40)]
    sign_in(page, console)
    page.fill("#new_list", "campaign")
    paste(page, "#text", "\n".join(numbers))
    page.click("[data-submit]")
    page.wait_for_selector("#report-title:has-text('Report')")

    page.goto(console.url + "/send?list=campaign")
    page.fill("#campaign-body", "Your order has shipped <b>today</b>")
    page.click("text=Review before sending")
    heading = page.locator("[data-confirm-count]")
    assert heading.inner_text() == "This will send 40 messages"
    page.click("[data-confirm]")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    page.wait_for_selector("[data-campaign-coverage]:has-text('100.0 %')", timeout=60_000)
    assert page.inner_text("tr[data-state=DELIVERED] [data-state-count]") != "0"

    assert page.inner_text("[data-phase]") == "DONE"
    assert "data-refresh" not in page.content()  # nothing can change: no more reloads
    page.screenshot(path=str(shots / "campaign.png"))

    page.goto(console.url + "/dashboard")
    assert page.inner_text("[data-coverage]") == "100.0 %"
    assert "%" in page.inner_text("[data-delivered]")
    assert page.locator("svg.chart rect.total").count() >= 1
    assert page.get_attribute("[data-alert=coverage_low]", "data-firing") == "no"
    assert all(0 < (shots / f).stat().st_size < 250_000 for f in
               ("import-progress.png", "import-report.png", "campaign.png"))

    page.goto(console.url + "/messages?q=" + numbers[0].replace(" ", ""))
    page.click("table a[href^='/messages?q=']")
    assert page.locator("[data-event=applied]").count() >= 1
    assert "<b>" in page.inner_text("main")  # shown as text, not markup


def test_sign_out_then_pages_need_a_session(page: Any, console: Server) -> None:
    sign_in(page, console, "/lists")
    page.click("form.signout button")
    page.wait_for_url(re.compile(r"/login$"))
    page.goto(console.url + "/dashboard")
    assert page.url == console.url + "/login?next=/dashboard"
    page.fill("#username", "alice")
    page.fill("#password", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(console.url + "/dashboard")


def test_a_list_is_searched_exported_and_deleted_after_a_confirmation_stating_the_count(
        page: Any, console: Server, shots: Path) -> None:
    numbers = [f"0536 000 {i:02d} {i % 7}{i % 10}, Müşteri {i}" for i in range(60)]
    sign_in(page, console)
    page.fill("#new_list", "browse")
    paste(page, "#text", "\n".join(numbers))
    page.click("[data-submit]")
    page.wait_for_selector("#report-title:has-text('Report')")
    page.goto(console.url + "/lists")
    page.click("tr[data-list='browse'] td a")
    assert page.inner_text("[data-list-count]") == "60"

    page.fill("#q", "0536 000 12 52")
    page.click("form[role=search] button")
    assert page.locator("tr[data-contact]").count() == 1
    assert page.get_attribute("tr[data-contact]", "data-contact") == "+905360001252"
    page.fill("#q", "Müşteri 5")
    page.click("form[role=search] button")
    assert page.locator("tr[data-contact]").count() == 11  # 5 and 50..59
    page.click("text=Show all")
    page.screenshot(path=str(shots / "list.png"))

    with page.expect_download() as download:
        page.click("[data-export]")
    with open(download.value.path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["msisdn", "name", "added_at"] and len(rows) == 61
    assert ["+905360001252", "Müşteri 12"] in [r[:2] for r in rows]

    page.click("tr[data-contact='+905360001252'] [data-delete-contact]")
    assert page.inner_text("[data-delete-count]") == "This deletes 1 contact from the list browse"
    page.click("[data-confirm-delete]")
    assert "Deleted 1 contact" in page.inner_text("main")
    assert page.inner_text("[data-list-count]") == "59"

    page.click("[data-delete-list]")
    heading = page.inner_text("[data-delete-count]")
    assert heading == "This deletes the list browse and its 59 contacts"
    page.click("[data-confirm-delete]")
    page.wait_for_url(re.compile(r"/lists\?deleted="))
    assert "Deleted the list browse and its 59 contacts" in page.inner_text("[data-deleted-note]")
    assert page.locator("tr[data-list='browse']").count() == 0


def test_a_key_revoked_in_the_console_is_refused_at_once(page: Any, console: Server) -> None:
    sign_in(page, console, "/keys")
    page.click("[data-create-key]")
    key = page.inner_text("[data-new-key]").strip()
    assert key.startswith("apl_")
    with httpx.Client(base_url=console.url, headers={"Authorization": f"Bearer {key}"},
                      timeout=10) as api:
        assert api.get("/api/jobs").status_code == 200
        page.goto(console.url + "/keys")
        assert key not in page.content()  # shown once, never again
        page.click(f"tr[data-key='{key[:8]}'] [data-revoke]")
        page.click("[data-confirm-revoke]")
        page.wait_for_selector("[data-revoked-note]")
        assert api.get("/api/jobs").status_code == 401  # the next request after the click
    assert "REVOKED" in page.inner_text(f"tr[data-key='{key[:8]}'] [data-key-state]")


def test_the_import_preview_shows_columns_and_outcomes_before_anything_is_stored(
        page: Any, console: Server, shots: Path) -> None:
    sign_in(page, console)
    page.fill("#new_list", "preview-only")
    paste(page, "#text", "telefon;ad;şehir\n0532 111 22 33;Ayşe;İzmir\n\nnot a number\n"
                         "+90 532 444 55 66;Mehmet;Ankara\n")
    page.wait_for_selector("[data-preview] table.preview-table")
    rows = page.locator("[data-preview] tbody tr")
    assert rows.count() == 4
    assert "header row: skipped" in rows.nth(0).inner_text()
    assert "+905321112233" in rows.nth(1).inner_text() and "Ayşe" in rows.nth(1).inner_text()
    assert "rejected" in rows.nth(2).inner_text()
    assert page.locator("[data-preview] thead th").count() == 1 + 3 + 3  # line, 3 columns, 3
    page.screenshot(path=str(shots / "import-preview.png"))
    page.goto(console.url + "/lists")
    assert "preview-only" not in page.inner_text("main")
