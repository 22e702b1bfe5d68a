"""How the suite is shared between ``pytest -n`` workers (pytest-xdist, ``--dist loadgroup``).

``make test`` runs the suite on three workers (``WORKERS``), then the tests marked
``serial`` alone (they time something, so another worker's load could fail them).
``plan`` decides, the same way in every worker, how the rest is shared out:

- a module whose tests share a module-scoped fixture (a server, a browser) runs on one
  worker, so the fixture is set up once (a group named after the module); every other
  test goes wherever a worker is free;
- the units holding a ``slow`` test go first, then the larger groups, so the long ones
  do not start last and leave one worker running alone at the end.

Outside a worker (``pytest`` alone) it changes nothing.

A group travels to the controller in the test's id, ``path::test@group``, as
pytest-xdist's own ``xdist_group`` marker would carry it; its code for that sets an
attribute pytest 9 no longer reads, so :func:`_join` sets the id itself.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import coerce_node_id

SHARED_SCOPES = ("class", "module", "package")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shares_a_fixture(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function):
        return False
    return any(d.scope in SHARED_SCOPES
               for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs)


def _join(item: pytest.Item, group: str) -> None:
    """Put ``item`` in ``group`` for ``--dist loadgroup`` (see the module's docstring)."""
    item._id = coerce_node_id(f"{item.nodeid}@{group}")


def plan(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the module groups and order ``items`` (only in a pytest-xdist worker)."""
    if not hasattr(config, "workerinput"):
        return
    grouping = bool(config.getvalue("loadgroup"))
    grouped = {_module(i) for i in items if _shares_a_fixture(i)}
    units: dict[str, list[pytest.Item]] = {}
    for index, item in enumerate(items):
        module = _module(item)
        if module in grouped:
            if grouping:
                _join(item, module)
            units.setdefault(module, []).append(item)
        else:
            units[f"{module}#{index}"] = [item]

    def order(unit: list[pytest.Item]) -> tuple[bool, int]:
        slow = any(i.get_closest_marker("slow") for i in unit)
        return (not slow, -len(unit))

    items[:] = [i for unit in sorted(units.values(), key=order) for i in unit]
