"""The docs cite code by name, and every name they cite is there.

``docs/*.md`` (and the README) cite code as ```appliance.package.module.symbol``` (a
dotted name in backticks, as far down as a class's method), a module or package the
same way, and files as ```appliance/...``` paths. A line number goes stale with the
next edit above it, silently; a name moves with a rename and this test says so. So:

- every dotted ``appliance.`` name in backticks imports (the longest importable prefix)
  and the rest is found attribute by attribute;
- every backticked ``appliance/`` path exists (a ``*`` matches as a glob);
- no ``file.py:123`` citation is left;
- the package table of ``docs/architecture.md`` names every package under
  ``appliance/``.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from tests.harness import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `appliance.x.y` or `appliance.x.y.Name.method`, optionally called: `appliance.x.f()`.
DOTTED = re.compile(r"`(appliance(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")
# `appliance/x/y.py`, `appliance/x/`, `appliance/store/*`
PATH = re.compile(r"`(appliance/[A-Za-z0-9_./*]*)`")
LINE_CITATION = re.compile(r"\b[\w/]+\.py:\d+")
TABLE_ROW = re.compile(r"^\| `(appliance/[^`]+)`")
# The appliance's own files, named like modules: `appliance.db`, `appliance.log`.
FILE_NAMES = {"appliance.db", "appliance.log", "appliance.lock", "appliance.toml"}


def _has(target: object, name: str) -> bool:
    """``getattr``, or for a class an attribute its instances get (a dataclass field, an
    annotation, or ``self.name = ...`` in its code)."""
    if hasattr(target, name):
        return True
    if not inspect.isclass(target):
        return False
    for cls in target.__mro__:
        if name in getattr(cls, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(name)}\s*(?::[^=]+)?=", source):
            return True
    return False


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute reached from one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            # Only "this very module is missing" means try a shorter prefix; a module
            # that fails to import for another reason is a failure of its own.
            if exc.name is None or not ".".join(parts[:cut]).startswith(exc.name):
                raise
            continue
        for index, name in enumerate(parts[cut:], start=cut):
            if not _has(target, name):
                return False
            if not hasattr(target, name):
                return index == len(parts) - 1  # an instance attribute: nothing below it
            target = getattr(target, name)
        return True
    return False


def citations(path: Path) -> list[tuple[int, str]]:
    return [(number, match.group(1))
            for number, line in enumerate(path.read_text().splitlines(), start=1)
            for match in DOTTED.finditer(line) if match.group(1) not in FILE_NAMES]


def paths(path: Path) -> list[tuple[int, str]]:
    return [(number, match.group(1))
            for number, line in enumerate(path.read_text().splitlines(), start=1)
            for match in PATH.finditer(line)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_module_and_symbol_exists(doc: Path) -> None:
    stale = [f"{doc.name}:{n}: {name}" for n, name in citations(doc) if not resolves(name)]
    assert not stale, "cited code that is not there (moved or renamed?):\n" + "\n".join(stale)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_path_exists(doc: Path) -> None:
    missing = [f"{doc.name}:{n}: {p}" for n, p in paths(doc)
               if not (any(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())]
    assert not missing, "cited paths that are not there:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_citation_by_line_number(doc: Path) -> None:
    found = [f"{doc.name}:{n}: {m.group(0)}"
             for n, line in enumerate(doc.read_text().splitlines(), start=1)
             for m in LINE_CITATION.finditer(line)]
    assert not found, "cite `appliance.module.symbol`, not a line:\n" + "\n".join(found)


def test_the_package_table_lists_every_package() -> None:
    rows = [m.group(1) for line in (ROOT / "docs" / "architecture.md").read_text().splitlines()
            if (m := TABLE_ROW.match(line))]
    listed = {row.rstrip("/") for row in rows}
    packages = {str(init.parent.relative_to(ROOT))
                for init in (ROOT / "appliance").rglob("__init__.py")
                if "__pycache__" not in init.parts} - {"appliance"}
    assert not packages - listed, (
        f"packages missing from the table in docs/architecture.md: {sorted(packages - listed)}")


def test_a_stale_citation_is_caught() -> None:
    assert resolves("appliance.store.writer")
    assert resolves("appliance.imports.normalise.normalise_msisdn")
    assert not resolves("appliance.imports.normalise.no_such_function")
    assert not resolves("appliance.no_such_package.thing")
    assert resolves("appliance.simulator.receipts.ReceiptPush.pending")  # set in __init__
    assert not resolves("appliance.simulator.receipts.ReceiptPush.no_such_field")
