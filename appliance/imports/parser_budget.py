"""How many parser processes a large import gets: the cores, then the memory allowed.

The box the appliance is sold for is small (a 1 GB VM runs the server, its parser
processes and the page cache), and a container's limit is its cgroup's, not the
host's RAM: a parser started past it gets the whole tree killed by the OOM killer,
where parsing in the server would only have been slower. So:

1. **Cores**: one parser a core beside the server's, at least one, two at most (past
   that the writer's core is the bound); ``[import] parser_processes`` replaces this
   count when it is not 0.
2. **Memory**: the limit is ``[import] memory_limit_mb`` when it is not 0, else the
   cgroup's (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, the lowest along the
   process's cgroup path up to the mount: a parent's limit binds its children too);
   none when neither says. With a limit, :data:`SERVER_MB` is kept for the server (its
   own peak during a 1,000,000-line import, with SQLite's page cache and the OS's for
   the database file, which a cgroup counts too) and each parser needs
   :data:`PARSER_MB` of what is left: ``parsers = min(cores, (limit - SERVER_MB) //
   PARSER_MB)``.
3. **None fits** (``parsers`` is 0): the job is parsed in a thread of the server,
   reading the payload a piece at a time as a parser does; the import is slower (one
   core, shared with the server), never killed for it.

The two budgets are the figures ``bench/bench_import_memory.py`` measures, with room:
``docs/benchmarks.md`` gives them.
"""

from __future__ import annotations

import os
from pathlib import Path

from appliance.config.sections import ImportSettings

SERVER_MB = 256  # kept for the server before any parser is counted
PARSER_MB = 64  # a parser process's peak, with room
MAX_PARSERS = 2  # by the cores: past this the writer's core is the bound
CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 1 << 60  # v1 writes "no limit" as a number near 2**63


def _read_limit(path: Path) -> int | None:
    try:
        raw = path.read_text().strip()
    except OSError:
        return None
    if not raw.isdigit():  # v2's "max"
        return None
    value = int(raw)
    return value if value < _UNLIMITED else None


def _lowest_along(mount: Path, relative: str, name: str) -> int | None:
    """The lowest limit in file ``name`` from ``mount/relative`` up to ``mount``."""
    found: list[int] = []
    here = mount / relative.strip("/") if relative.strip("/") else mount
    while True:
        limit = _read_limit(here / name)
        if limit is not None:
            found.append(limit)
        if here == mount or mount not in here.parents:
            break
        here = here.parent
    return min(found) if found else None


def cgroup_memory_limit(root: Path = CGROUP_ROOT,
                        proc_cgroup: Path = Path("/proc/self/cgroup")) -> int | None:
    """The memory limit of this process's cgroup in bytes (v2, else v1), or None."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    v2_path = v1_path = ""
    for line in lines:
        _id, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    if (root / "cgroup.controllers").exists():  # v2, unified at the root
        return _lowest_along(root, v2_path, "memory.max")
    if (root / "memory").is_dir():
        return _lowest_along(root / "memory", v1_path, "memory.limit_in_bytes")
    return None


def memory_limit_mb(settings: ImportSettings, root: Path = CGROUP_ROOT,
                    proc_cgroup: Path = Path("/proc/self/cgroup")) -> int | None:
    """The memory the appliance may use, in MB: the setting, else the cgroup's."""
    if settings.memory_limit_mb > 0:
        return settings.memory_limit_mb
    limit = cgroup_memory_limit(root, proc_cgroup)
    return None if limit is None else limit // (1024 * 1024)


def parser_processes(settings: ImportSettings | None = None, root: Path = CGROUP_ROOT,
                     proc_cgroup: Path = Path("/proc/self/cgroup")) -> int:
    """Parser processes for a large import (0: parse in the server's thread); without
    ``settings``, with the defaults."""
    settings = settings or ImportSettings()
    by_cores = settings.parser_processes or max(1, min(MAX_PARSERS, os.cpu_count() or 1))
    limit = memory_limit_mb(settings, root, proc_cgroup)
    if limit is None:
        return by_cores
    return max(0, min(by_cores, (limit - SERVER_MB) // PARSER_MB))
