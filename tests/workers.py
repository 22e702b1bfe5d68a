"""How the suite is shared between ``pytest -n`` workers (pytest-xdist, ``--dist loadgroup``).

``make test`` runs the suite on two workers, then the tests marked ``serial`` alone (they
time something, so another worker's load could fail them). ``plan`` decides, the same way
in every worker, how the rest is shared out:

- a module whose tests share a module-scoped fixture (a server, a browser) runs on one
  worker, so the fixture is set up once (an ``xdist_group`` named after the module);
  every other test goes wherever a worker is free;
- the units holding a ``slow`` test go first, then the larger groups, so the long ones
  do not start last and leave one worker running alone at the end.

Outside a worker (``pytest`` alone) it changes nothing.
"""

from __future__ import annotations

import pytest

SHARED_SCOPES = ("class", "module", "package")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shares_a_fixture(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function):
        return False
    return any(d.scope in SHARED_SCOPES
               for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs)


def plan(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the module groups and order ``items`` (only in a pytest-xdist worker)."""
    if not hasattr(config, "workerinput"):
        return
    grouped = {_module(i) for i in items if _shares_a_fixture(i)}
    units: dict[str, list[pytest.Item]] = {}
    for index, item in enumerate(items):
        module = _module(item)
        if module in grouped:
            item.add_marker(pytest.mark.xdist_group(module))
            units.setdefault(module, []).append(item)
        else:
            units[f"{module}#{index}"] = [item]

    def order(unit: list[pytest.Item]) -> tuple[bool, int]:
        slow = any(i.get_closest_marker("slow") for i in unit)
        return (not slow, -len(unit))

    items[:] = [i for unit in sorted(units.values(), key=order) for i in unit]
