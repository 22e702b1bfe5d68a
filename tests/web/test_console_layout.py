"""What a new user saw in the console (issue 32), checked in a real headless Chromium
against ``appliance demo`` (both providers, an SMPP session, an import and campaigns):
where sign-in leads, values that must never be cut off or broken inside, the chart's
last label, the list a job went into, the ETA's date, and a banner that must not
outlive what it says."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import appliance_cmd, db_rows, free_port, wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]
DATE = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium (apt-get install"
                              " chromium; .ci/run installs it)"),
]


class Demo:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.data_dir = root / "demo-data"
        self.out = root / "demo.out"
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                appliance_cmd("demo", "--data-dir", str(self.data_dir), "--port", str(self.port)),
                stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env)
        self.password = self._banner(r"user demo, password (\S+)")
        self.key = self._banner(r"API key\s+(apl_\S+)")

    def _banner(self, pattern: str) -> str:
        found = wait_for(lambda: re.search(pattern, self.out.read_text(errors="replace")), 60,
                         message=f"{pattern!r} in the banner")
        return found.group(1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30,
                            headers={"Authorization": f"Bearer {self.key}"})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = Demo(tmp_path_factory.mktemp("layout"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def page(demo: Demo) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 700})
            context.set_default_timeout(30_000)
            opened = context.new_page()
            opened.goto(demo.url + "/")
            opened.fill("#username", "demo")
            opened.fill("#password", demo.password)
            opened.click("form[action='/login'] button[type=submit]")
            opened.wait_for_load_state()
            yield opened
        finally:
            browser.close()


# How many lines a piece of text takes on screen (a Range's boxes, one per line).
TEXT_LINES = """(args) => {
  const [root, pattern] = args;
  const re = new RegExp(pattern);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const m = re.exec(node.data);
    if (!m) continue;
    const range = document.createRange();
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    return tops.size;
  }
  return -1;
}"""


def lines_of(page: Any, selector: str, pattern: str) -> int:
    """Lines on screen of the first text matching ``pattern`` under ``selector``."""
    return int(page.evaluate(f"(p) => ({TEXT_LINES})([document.querySelector(p[0]), p[1]])",
                             [selector, pattern]))


def test_sign_in_opens_the_dashboard(page: Any, demo: Demo) -> None:
    assert page.url == demo.url + "/dashboard"


def test_the_smpp_panel_keeps_its_date_on_one_line(page: Any, demo: Demo) -> None:
    page.goto(demo.url + "/dashboard")
    page.wait_for_selector("[data-smpp][data-bound=yes]")
    date = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert lines_of(page, "[data-smpp-sessions]", date) == 1
    # And the table fits its panel: nothing of it is scrolled out of sight.
    assert page.eval_on_selector("[data-smpp-sessions] .scroll",
                                 "el => el.scrollWidth <= el.clientWidth")


def test_the_charts_last_hour_label_is_drawn_whole(page: Any, demo: Demo) -> None:
    page.goto(demo.url + "/dashboard")
    outside = page.eval_on_selector("svg.chart", """svg => {
      const width = svg.viewBox.baseVal.width;
      return Array.from(svg.querySelectorAll('text'))
        .filter(t => /^\\d\\d:00$/.test(t.textContent))
        .map(t => t.getBBox()).filter(b => b.x < 0 || b.x + b.width > width).length; }""")
    assert outside == 0


def test_the_message_page_shows_every_card_value_whole(page: Any, demo: Demo) -> None:
    [(ref,)] = wait_for(lambda: db_rows(
        demo.data_dir, "SELECT ref FROM messages WHERE encoding = 'UCS-2' AND campaign_id"
        " IS NOT NULL AND parts > 1 ORDER BY id LIMIT 1"), 60, message="a UCS-2 campaign message")
    page.goto(f"{demo.url}/messages?q={ref}")
    cards = page.eval_on_selector_all("[data-message-facts] dd", "dds => dds.length")
    assert cards == 6  # To, Provider, Attempts, Encoding, Parts, Campaign
    cut = page.eval_on_selector_all(
        "[data-message-facts] dd", "dds => dds.filter(d => d.scrollWidth > d.clientWidth"
        " || d.getBoundingClientRect().right > d.parentElement.getBoundingClientRect().right)"
        ".map(d => d.textContent)")
    assert cut == []
    assert lines_of(page, "[data-message-facts]", r"\+90\d{10}") == 1
    assert lines_of(page, "[data-message-facts]", r"UCS-2 \(because of '.'\)") == 1


def test_a_job_page_links_its_own_list_and_says_which_rate_it_shows(page: Any,
                                                                    demo: Demo) -> None:
    [(list_id,)] = db_rows(demo.data_dir, "SELECT list_id FROM import_jobs WHERE id = 1")
    wait_for(lambda: db_rows(demo.data_dir, "SELECT state FROM import_jobs WHERE id = 1")
             == [("DONE",)], 60, message="the demo's import")
    page.goto(demo.url + "/jobs/1")
    href = page.locator("main p:has-text('Into list') a").first.get_attribute("href")
    assert href == f"/lists/{list_id}"
    figures = page.inner_text("#job-figures")
    assert re.search(r"\(100\.0 %\) · [\d\u2009 ]+ rows/s on average", figures), figures


def test_a_running_campaign_gives_its_eta_as_every_other_date(page: Any, demo: Demo) -> None:
    with demo.api() as api:
        made = api.post("/api/campaigns", json={"list": "demo-list", "body": "eta",
                                                "provider": "sim"})
        assert made.status_code == 202, made.text
        cid = made.json()["campaignId"]

    def eta_shown() -> str | None:
        page.goto(f"{demo.url}/campaigns/{cid}")
        found = page.locator("[data-eta-at]")
        return found.inner_text() if found.count() else None

    eta = wait_for(eta_shown, 60, interval=0.5, message="the campaign's ETA")
    assert re.match(DATE, eta), eta
    assert "over the last minute" in page.inner_text("[data-campaign-pace]")


def test_the_queued_banner_does_not_outlive_the_queue(page: Any, demo: Demo) -> None:
    [(ref,)] = wait_for(lambda: db_rows(
        demo.data_dir, "SELECT ref FROM messages WHERE state = 'DELIVERED' LIMIT 1"), 60,
        message="a delivered message")
    page.goto(f"{demo.url}/messages?q={ref}&sent=1")  # the send form's page, reloaded later
    assert page.inner_text("[data-message-state]") == "DELIVERED"
    assert "queued for sending" not in page.inner_text("main")
