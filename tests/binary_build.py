"""The one-file binary for ``tests/ops/test_binary.py``, built in the background.

PyInstaller takes about half a minute of one core. When the binary tests are selected,
the build starts as soon as collection ends, at the lowest CPU priority (``nice 19``):
it runs in the time the tests before it spend waiting on their servers, and takes
nothing from a test that needs the CPU. The binary tests then wait for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.harness import ROOT

BINARY_TESTS = "tests/ops/test_binary.py"


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
    """``build/build_binary.py`` in a child process at the lowest priority."""

    def __init__(self) -> None:
        self.dist = Path(tempfile.mkdtemp(prefix="appliance-binary-"))
        self.log = self.dist / "build.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                ["nice", "-n", "19", sys.executable, str(ROOT / "build" / "build_binary.py"),
                 "--distpath", str(self.dist / "dist")],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

    def result(self, timeout: float = 600) -> Path:
        """The built binary, once the build has finished (an error if it failed)."""
        code = self.proc.wait(timeout)
        if code != 0:
            raise AssertionError(f"the binary build failed ({code}):\n"
                                 f"{self.log.read_text(errors='replace')[-4000:]}")
        return self.dist / "dist" / "appliance"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dist, ignore_errors=True)


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


def start_if_needed(selected: list[str]) -> None:
    """Start the build when a binary test is among the ``selected`` node ids."""
    global _build
    if _build is None and any(n.startswith(BINARY_TESTS) for n in selected) \
            and given_binary() is None:
        _build = BackgroundBuild()


def binary() -> Path:
    """The binary to test: given, or built (in the background when it was started)."""
    found = given_binary()
    if found is not None:
        return found
    global _build
    if _build is None:
        _build = BackgroundBuild()
    return _build.result()


def stop() -> None:
    global _build
    if _build is not None:
        _build.close()
        _build = None
