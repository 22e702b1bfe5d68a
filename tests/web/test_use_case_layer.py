"""The console and the API share one use-case layer: the console reaches no API module.

Read from the source: no module under ``appliance/web/pages`` imports an
``appliance.web.api_*`` module, and each kind of refusal the use cases raise has the
status the API answers for it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import appliance
from appliance import refusals
from appliance.web.errors import REFUSAL_STATUS, api_error

PAGES = Path(appliance.__file__).parent / "web" / "pages"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_console_page_imports_an_api_module() -> None:
    pages = sorted(PAGES.glob("*.py"))
    assert pages
    reaching = {p.name: sorted(m for m in imported_modules(p)
                               if m.startswith("appliance.web.api_"))
                for p in pages}
    assert {name: mods for name, mods in reaching.items() if mods} == {}


def test_every_kind_of_refusal_has_its_status() -> None:
    kinds = [k for k in vars(refusals).values()
             if isinstance(k, type) and issubclass(k, refusals.Refused)
             and k is not refusals.Refused]
    assert sorted(k.__name__ for k in kinds) == sorted(k.__name__ for k in REFUSAL_STATUS)
    answer = api_error(refusals.Conflict("suppressed", "on the list", msisdn="+905321234567"))
    assert (answer.status, answer.error, answer.message, answer.extra) == (
        409, "suppressed", "on the list", {"msisdn": "+905321234567"})
    assert api_error(refusals.Unavailable("storage_full", "full")).retry_after is not None


def test_the_console_runs_no_sql_of_its_own() -> None:
    """The console's pages, its session and its sign-in guard call units of the domain
    (``appliance.console_sessions``, ``appliance.sign_in_attempts``, the use cases);
    none of them sends a statement itself."""
    console = [*sorted(PAGES.glob("*.py")), PAGES.parent / "session.py"]
    sending: dict[str, int] = {}
    for path in console:
        calls = [node for node in ast.walk(ast.parse(path.read_text(), str(path)))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr in ("execute", "executemany")]
        if calls:
            sending[path.name] = len(calls)
    assert sending == {}
