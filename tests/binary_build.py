"""The one-file binary for ``tests/ops/test_binary.py``, built in the background.

PyInstaller takes about half a minute of one core. When the binary tests are selected,
the build starts as soon as collection ends, at the lowest CPU priority (``nice 19``):
it runs in the time the tests before it spend waiting on their servers, and takes
nothing from a test that needs the CPU. The binary tests then wait for it.

Under ``pytest -n`` (pytest-xdist) the controller starts the one build, into a folder it
names in ``TESTS_BINARY_BUILD`` before the workers start; the worker that runs the binary
tests waits for the build's exit status to appear there, and the controller removes the
folder when the session ends. (Not ``APPLIANCE_*``: the binaries the tests start would
refuse an unknown setting of that name.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.harness import ROOT

BINARY_TESTS = "tests/ops/test_binary.py"
SHARED = "TESTS_BINARY_BUILD"
STATUS = "status"  # the build's exit code, written when it ends


def newest_source() -> float:
    """The newest modification time among the files the binary is built from."""
    newest = 0.0
    for folder in ("appliance", "build"):
        for path in (ROOT / folder).rglob("*"):
            parts = path.relative_to(ROOT).parts
            if path.is_file() and parts[:2] != ("build", "work") and "__pycache__" not in parts:
                newest = max(newest, path.stat().st_mtime)
    return newest


class BackgroundBuild:
    """``build/build_binary.py`` in a child process at the lowest priority, in ``folder``
    (a new temporary one by default); the exit code is written to ``folder/status``."""

    def __init__(self, folder: Path | None = None) -> None:
        self.dist = folder or Path(tempfile.mkdtemp(prefix="appliance-binary-"))
        self.log = self.dist / "build.log"
        status = self.dist / STATUS
        script = ('nice -n 19 "$@"; code=$?; echo $code > "$0.tmp" && mv "$0.tmp" "$0";'
                  ' exit $code')
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                ["sh", "-c", script, str(status), sys.executable,
                 str(ROOT / "build" / "build_binary.py"), "--distpath", str(self.dist / "dist")],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

    def result(self, timeout: float = 600) -> Path:
        """The built binary, once the build has finished (an error if it failed)."""
        return wait_for_build(self.dist, timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dist, ignore_errors=True)


def wait_for_build(folder: Path, timeout: float = 600) -> Path:
    """The binary a build in ``folder`` made, once its status says it ended."""
    deadline = time.monotonic() + timeout
    status = folder / STATUS
    while not status.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the binary build did not end within {timeout} s")
        time.sleep(0.2)
    code = int(status.read_text().strip() or "1")
    if code != 0:
        log = folder / "build.log"
        raise AssertionError(f"the binary build failed ({code}):\n"
                             f"{log.read_text(errors='replace')[-4000:]}")
    return folder / "dist" / "appliance"


_build: BackgroundBuild | None = None
# Taken out of the environment: the binaries the tests start would refuse it as an
# unknown APPLIANCE_* setting.
_GIVEN = os.environ.pop("APPLIANCE_BINARY", "")


def given_binary() -> Path | None:
    """A binary that needs no build: ``APPLIANCE_BINARY``, or ``dist/appliance`` when it
    is newer than every source file."""
    if _GIVEN:
        return Path(_GIVEN)
    built = ROOT / "dist" / "appliance"
    if built.exists() and built.stat().st_mtime > newest_source():
        return built
    return None


def share_with_workers() -> None:
    """In the controller of ``pytest -n``, before the workers start: name the folder the
    one build of the session will go to."""
    if not os.environ.get(SHARED):
        os.environ[SHARED] = tempfile.mkdtemp(prefix="appliance-binary-")


def start_if_needed(selected: list[str]) -> None:
    """Start the build when a binary test is among the ``selected`` node ids (in the
    controller when the binary is shared with workers)."""
    global _build
    if _build is None and any(n.startswith(BINARY_TESTS) for n in selected) \
            and given_binary() is None:
        shared = os.environ.get(SHARED)
        _build = BackgroundBuild(Path(shared) if shared else None)


def binary() -> Path:
    """The binary to test: given, or built (in the background when it was started)."""
    global _build
    found = given_binary()
    if found is not None:
        return found
    shared = os.environ.get(SHARED)
    if shared and _build is None:
        return wait_for_build(Path(shared))  # a worker: the controller builds
    if _build is None:
        _build = BackgroundBuild()
    return _build.result()


def stop() -> None:
    """End the build this process started and remove its folder."""
    global _build
    if _build is not None:
        _build.close()
        _build = None
    shared = os.environ.get(SHARED)
    if shared:
        shutil.rmtree(shared, ignore_errors=True)
