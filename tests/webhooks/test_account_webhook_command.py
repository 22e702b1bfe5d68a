"""``appliance account webhook NAME``: the secret given or asked for (hidden, from the
terminal or stdin), a new URL or secret replacing the old, ``--clear``; an unknown
account, a URL that is no http(s) URL, or arguments that do not go together refused in
one line with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import create_account, db_rows, run_cli

URL = "http://127.0.0.1:9/hooks"


def receivers(data: Path) -> list[tuple[str, str, str]]:
    return [(str(n), str(u), str(s)) for n, u, s in db_rows(
        data, "SELECT a.name, r.url, r.secret FROM account_receivers r"
        " JOIN accounts a ON a.id = r.account_id ORDER BY a.name")]


def webhook(data: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    done = run_cli("account", "webhook", *args, "--data-dir", str(data), input=input,
                   check=check)
    return done.stdout + done.stderr


def test_the_secret_given_or_asked_for_and_cleared(data_dir: Path) -> None:
    create_account(data_dir, "alpha")
    create_account(data_dir, "beta")
    said = webhook(data_dir, "alpha", "--url", URL + "?token=t", "--secret", "s-alpha")
    assert "alpha's events" in said and "token" not in said
    asked = webhook(data_dir, "beta", "--url", URL, input=b"s-beta\ns-beta\n")
    assert "Secret" in asked and "s-beta" not in asked  # asked for, not echoed
    assert receivers(data_dir) == [("alpha", URL + "?token=t", "s-alpha"),
                                   ("beta", URL, "s-beta")]
    webhook(data_dir, "alpha", "--url", URL + "/new", "--secret", "s-alpha-2")
    assert receivers(data_dir)[0] == ("alpha", URL + "/new", "s-alpha-2")
    assert "removed" in webhook(data_dir, "alpha", "--clear")
    assert receivers(data_dir) == [("beta", URL, "s-beta")]
    assert "has no receiver of its own" in webhook(data_dir, "alpha", "--clear")


@pytest.mark.parametrize(("args", "says"), [
    (("nobody", "--url", URL, "--secret", "s"), "no account named 'nobody'"),
    (("alpha", "--url", "ftp://example.org/", "--secret", "s"), "not an http:// or https://"),
    (("alpha", "--url", "https:///path", "--secret", "s"), "has no host"),
    (("alpha", "--url", "https://exa mple.org/", "--secret", "s"), "has spaces"),
    (("alpha", "--url", URL, "--secret", " "), "the secret is empty"),
    (("alpha", "--secret", "s"), "give --url URL"),
    (("alpha", "--clear", "--url", URL), "--clear takes no --url"),
])
def test_mistakes_are_refused_in_one_line_with_nothing_stored(
        data_dir: Path, args: tuple[str, ...], says: str) -> None:
    create_account(data_dir, "alpha")
    done = run_cli("account", "webhook", *args, "--data-dir", str(data_dir), check=False)
    assert done.returncode == 1 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert receivers(data_dir) == []


def test_help_says_what_it_does() -> None:
    shown = run_cli("account", "webhook", "--help").stdout
    assert "--secret" in shown and "--clear" in shown and "[webhooks]" in shown
