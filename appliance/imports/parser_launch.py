"""Starting a parser process: ``spawn``, minus two things it brings along.

``multiprocessing``'s ``spawn`` (POSIX) does two things a parser does not need, each
costing the process tree memory for the whole life of the server:

- it starts the **resource tracker**, a third Python process (13 MB RSS measured) that
  unlinks the named semaphores and shared memory a child leaves behind. A parser makes
  neither: it talks over two pipes;
- it has the child import the parent's **main module** again (as ``__mp_main__``):
  started as the ``appliance`` console script, that is the whole command line
  interface (9 MB more a parser). ``python -m appliance`` is spared it already.

:class:`ParserProcess` is a ``spawn`` process whose launch is CPython's own
(``multiprocessing/popen_spawn_posix.py``, 3.11) without those two: the same command
line, less the tracker's descriptor, and the same preparation data, less the main
module's name and path. The child runs ``spawn_main`` as usual (in the frozen binary,
``freeze_support`` in ``build/entry.py``), imports the target's module
(:mod:`appliance.imports.parser_child`) and nothing else of the server's.
"""

from __future__ import annotations

import io
import os
from multiprocessing import context, reduction, spawn, util
from multiprocessing.popen_spawn_posix import Popen as SpawnPopen
from typing import Any

_MAIN_MODULE_KEYS = ("init_main_from_name", "init_main_from_path")


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


class _LeanPopen(SpawnPopen):
    """CPython's spawn launch without the resource tracker and the main module."""

    _fds: list[int]  # set by SpawnPopen: the descriptors the child is given

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        for key in _MAIN_MODULE_KEYS:
            prep_data.pop(key, None)
        fp = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, fp)
            reduction.dump(process_obj, fp)
        finally:
            context.set_spawning_popen(None)
        parent_r = child_w = child_r = parent_w = None
        try:
            parent_r, child_w = os.pipe()
            child_r, parent_w = os.pipe()
            cmd = spawn.get_command_line(pipe_handle=child_r)
            self._fds.extend([child_r, child_w])
            self.pid = util.spawnv_passfds(os.fsencode(spawn.get_executable()), cmd, self._fds)
            self.sentinel = parent_r
            with open(parent_w, "wb", closefd=False) as f:
                f.write(fp.getbuffer())
        finally:
            self.finalizer = util.Finalize(
                self, _close, tuple(fd for fd in (parent_r, parent_w) if fd is not None))
            for fd in (child_r, child_w):
                if fd is not None:
                    os.close(fd)


class ParserProcess(context.SpawnProcess):
    """A ``spawn`` process started by :class:`_LeanPopen`."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _LeanPopen(process_obj)
