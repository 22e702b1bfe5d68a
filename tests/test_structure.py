"""The shape of the code: the packages form a stack and no modules import each other in
a circle, type-only imports included (``if TYPE_CHECKING:`` blocks are read too).

The stack, from the ground: the store and the plain helpers (config, clock, logs,
scheduler, the neutral text and state modules); the runtime; the domain (imports,
sending, reports, inbound, optout, webhooks, providers, smpp, and the loops beside
them); the list of every provider kind (``provider_kinds``, above the providers and
the SMPP kind built on them); operations (``ops``); the web layer; the server and the
command line. An import may go down the stack or stay on its floor, never up. The
imports read for the stack are a module's own statements, at module level (those
inside a function run late, on purpose, for the cold start); between two packages,
those inside functions count too: no two packages import each other both ways.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "appliance"
DOMAIN = {"imports", "sending", "reports", "inbound", "optout", "webhooks", "providers",
          "smpp", "retention", "offline", "simulator"}
TOP = {"server", "cli", "demo", "__main__", "proxy"}  # proxy: a command and its output


def floor(module: str) -> int:
    """0 the ground, 1 the runtime, 2 the domain, 3 the provider kinds, 4 operations,
    5 web, 6 server and CLI.

    What is named nowhere here (the store, config, clock, logs, the scheduler, the
    neutral text and state modules...) is the ground: it may import only the ground."""
    top = module.split(".")[1] if "." in module else ""
    if top == "runtime":
        return 1
    if top in DOMAIN:
        return 2
    if top in TOP:
        return 6
    return {"provider_kinds": 3, "ops": 4, "web": 5}.get(top, 0)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):  # if TYPE_CHECKING: and the like
            yield from module_level(node.body)
            yield from module_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from module_level(node.body)


def anywhere(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, those inside functions and classes included."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node


def imports_of(name: str, path: Path, known: dict[str, Path], *,
               late: bool = False) -> set[str]:
    out: set[str] = set()
    body = ast.parse(path.read_text()).body
    for node in anywhere(body) if late else module_level(body):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            anchor = package[:len(package) - node.level + 1]
            base = ".".join(anchor + ([node.module] if node.module else []))
        for alias in node.names:
            full = f"{base}.{alias.name}"
            out.add(full if full in known else base)
    return {m for m in out if m in known and m != name}


def graph(*, late: bool = False) -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known, late=late) for name, path in known.items()}


def package(module: str) -> str:
    """The package (or top-level module) of ``appliance`` that ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def both_ways(edges: dict[str, set[str]]) -> list[str]:
    """Each pair of packages that import each other, one way and the other."""
    between = {(package(m), package(d)) for m, deps in edges.items() for d in deps
               if package(m) != package(d)}
    return sorted(f"{a} <-> {b}" for a, b in between if a < b and (b, a) in between)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_another_in_a_circle() -> None:
    assert circles(graph()) == []


def test_every_import_goes_down_the_stack() -> None:
    up = [f"{m} -> {d}" for m, deps in sorted(graph().items()) for d in sorted(deps)
          if floor(d) > floor(m)]
    assert up == []


def test_the_runtime_knows_no_part() -> None:
    edges = graph()
    assert {d for d in edges["appliance.runtime"] if floor(d) > 1} == set()
    assert {d for d in edges["appliance.scheduler"] if floor(d) > 0} == set()


def test_no_two_packages_import_each_other_both_ways() -> None:
    """A package builds on another one way only: imports inside functions count too, so
    a late import is no way around the stack (the SMPP kind is listed above both the
    providers and the SMPP package, in ``provider_kinds``)."""
    assert both_ways(graph(late=True)) == []


def test_a_pair_importing_both_ways_is_found() -> None:
    edges = {"appliance.a.x": {"appliance.b.y"}, "appliance.b.y": set(),
             "appliance.b.z": {"appliance.a.x"}, "appliance.c": {"appliance.a.x"}}
    assert both_ways(edges) == ["appliance.a <-> appliance.b"]
    assert both_ways({"appliance.a.x": {"appliance.a.y"}, "appliance.a.y": set()}) == []


def test_a_circle_is_found_when_there_is_one() -> None:
    """The finder itself: a loop of three is one group; a chain is none."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# A module of one concept stays short enough to read whole (issue "One shape for every
# provider": none over 450 lines in appliance/).
MAX_MODULE_LINES = 450
# Where a provider kind's name may be written as a string: its own modules (a path part
# that starts with the name: ``providers/verimor.py``, ``providers/vonage_codes.py``,
# ``smpp/``, the ``simulator/`` fakes), the list of kinds, and the two places that write
# configuration and name commands (the demo and the CLI). ``http`` is left out: the same
# word is the ASGI scope type and a URL scheme everywhere.
KIND_NAME_FILES = {"provider_kinds.py", "demo.py", "cli.py"}


def test_no_module_is_over_450_lines() -> None:
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def kind_literals(kinds: set[str]) -> list[str]:
    """Each string literal naming a kind outside the files allowed to name it."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if parts[-1] in KIND_NAME_FILES and len(parts) == 1:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value in kinds
                    and not any(part.startswith(node.value) for part in parts)):
                found.append(f"{'/'.join(parts)}:{node.lineno} {node.value!r}")
    return found


def test_a_kind_is_named_only_by_its_own_modules_and_the_list_of_kinds() -> None:
    """Config, masking, the registry, inbound routing, metrics, health and the dashboard
    read the declarations; none compares a kind's name."""
    from appliance.provider_kinds import KINDS

    assert kind_literals(set(KINDS) - {"http"}) == []


def test_a_kind_named_elsewhere_is_found() -> None:
    """The finder itself: a name written in the web layer is caught (``http``, there the
    ASGI scope type); the kind's own module naming itself is not."""
    assert any(hit.startswith("web/") for hit in kind_literals({"http"}))
    assert not any(hit.startswith("providers/vonage") for hit in kind_literals({"vonage"}))
