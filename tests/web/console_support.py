"""Console test support: users made with the real CLI, signed-in HTTP clients."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.harness import Server, run_cli

PASSWORD = "correct horse battery"
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def create_user(data_dir: Path, name: str = "alice", account: str = "default",
                password: str = PASSWORD) -> None:
    run_cli("user", "create", name, "--password", password, "--account", account,
            "--data-dir", str(data_dir))


def csrf_of(html: str) -> str:
    found = CSRF_RE.search(html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@contextlib.contextmanager
def sign_in(server: Server, name: str = "alice", password: str = PASSWORD
            ) -> Iterator[httpx.Client]:
    """A client holding a console session (cookies), signed in through the real form."""
    with server.client() as client:
        form = client.get("/login")
        assert form.status_code == 200
        answer = client.post("/login", data={"csrf_token": csrf_of(form.text),
                                             "username": name, "password": password,
                                             "next": "/import"})
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/import"
        yield client


def page_token(client: httpx.Client, path: str = "/import") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


def import_form(token: str, text: str, new_list: str, region: str = "TR"
                ) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """The import form as a browser posts it (multipart, no file chosen)."""
    return ({"csrf_token": token, "list": "", "new_list": new_list, "region": region,
             "text": text}, {"file": ("", b"")})
