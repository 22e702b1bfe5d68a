"""The suppression and inbound pages in a real headless Chromium: a STOP received shows
on the inbound page and on the list; a number is added, found, uploaded and removed
through the confirmation, as an operator does it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.providers.http_json import body_signature
from tests.harness import ROOT, Server, create_account
from tests.web.console_support import create_user
from tests.web.test_console_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    UPDATE_SHOTS,
    VIEWPORT,
    paste,
    sign_in,
)

SECRET = "gw-browser-secret"
KEYS: dict[str, str] = {}  # account name -> API key

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs Debian's chromium at /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("optout-browser") / "data"
    data_dir.mkdir()
    KEYS["default"] = create_account(data_dir, "default")
    create_user(data_dir, "alice")
    config = data_dir.parent / "appliance.toml"
    config.write_text(f'[providers.gw]\nkind = "http"\nbase_url = "http://127.0.0.1:9"\n'
                      f'secret = "{SECRET}"\n')
    server = Server(data_dir, config=config).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ROOT / "docs" / "screenshots" if UPDATE_SHOTS else tmp_path_factory.mktemp("shots")


@pytest.fixture
def page(console: Server) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser: Any = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(30_000)
            yield context.new_page()
        finally:
            browser.close()


def receive(server: Server, msg_id: str, sender: str, text: str) -> None:
    body = json.dumps({"id": msg_id, "from": sender, "to": "ACME", "text": text}).encode()
    with server.client() as client:
        r = client.post("/inbound/gw", content=body, headers={
            "Content-Type": "application/json", "X-Signature": body_signature(body, SECRET)})
    assert r.status_code == 200


def test_a_stop_shows_and_the_operator_manages_the_list(page: Any, console: Server,
                                                        shots: Path) -> None:
    with console.client(KEYS["default"]) as api:  # alice's account messaged both numbers
        for number in ("+905329500001", "+905329500002"):
            assert api.post("/api/messages", json={"to": number, "body": "hi"}
                            ).status_code == 202
    receive(console, "b-1", "+905329500001", "İptal")
    receive(console, "b-2", "+905329500002", "Yarın arar mısınız?")
    sign_in(page, console, "/inbound")
    assert page.get_attribute("nav a[href='/inbound']", "aria-current") == "page"
    stop = page.locator("tr[data-stop]")
    assert stop.count() == 1 and "+905329500001" in stop.inner_text()
    assert "IPTAL" in stop.inner_text()
    page.screenshot(path=str(shots / "inbound.png"))
    stop.locator("a:has-text('suppressed')").click()
    page.wait_for_url(re.compile(r"/suppressions\?q="))
    row = page.locator("tr[data-suppression='+905329500001']")
    assert "inbound" in row.inner_text()

    page.click("nav a[href='/suppressions']")
    page.fill("#msisdn", "0532 950 00 03")
    page.fill("#reason", "asked at the shop")
    page.click("form[data-add-form] button[type=submit]")
    page.wait_for_selector("[data-notice]:has-text('+905329500003')")
    assert "asked at the shop" in page.inner_text("tr[data-suppression='+905329500003']")

    paste(page, "#supp-text", "+905329500004, moved away\nnot a number\n05329500005\n")
    page.click("form[data-upload-form] button[type=submit]")
    page.wait_for_selector("[data-upload-result]")
    assert page.inner_text("[data-added]") == "2"
    assert page.inner_text("[data-rejected]") == "1"
    assert "letters in number" in page.inner_text("[data-reject='2']")
    page.screenshot(path=str(shots / "suppressions.png"), full_page=True)

    page.fill("#q", "9500004")
    page.click("form[role=search] button[type=submit]")
    page.wait_for_selector("tr[data-suppression='+905329500004']")
    assert page.locator("tr[data-suppression]").count() == 1
    page.click("tr[data-suppression='+905329500004'] [data-remove]")
    page.wait_for_selector("[data-confirm-remove]")
    assert "+905329500004" in page.inner_text("h2")
    page.click("[data-confirm-remove]")
    page.wait_for_selector("[data-notice]:has-text('taken off')")
    assert page.locator("tr[data-suppression='+905329500004']").count() == 0
    assert page.locator("tr[data-suppression='+905329500005']").count() == 1

    # Removing an opt-out that came by STOP warns that the number asked to stop.
    page.click("tr[data-suppression='+905329500001'] [data-remove]")
    assert "asked to stop" in page.inner_text("main")
    page.click("text=Keep it")
    page.wait_for_url(console.url + "/suppressions")
    assert page.locator("tr[data-suppression='+905329500001']").count() == 1
