"""Helpers of the probe tests: recorded tool outputs and real fake tools on PATH.

Exposed as the ``kit`` fixture (the suite imports test modules with
``--import-mode=importlib``, so a sibling helper module cannot be imported).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "probe"


class Kit:
    fixtures = FIXTURES
    # Fake tools call other programs by absolute path, so PATH can be limited
    # to the fake tools and no real nvidia-smi or rocm-smi can answer.
    cat = shutil.which("cat") or "/bin/cat"
    sleep = shutil.which("sleep") or "/bin/sleep"

    @staticmethod
    def text(name: str) -> str:
        return (FIXTURES / name).read_text(encoding="utf-8")

    @staticmethod
    def tool(bin_dir: Path, name: str, script: str) -> Path:
        """Write an executable shell script ``name`` into ``bin_dir``."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + script, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    def cat_tool(self, bin_dir: Path, name: str, fixture: str) -> Path:
        """A tool that prints a recorded output, whatever its arguments."""
        return self.tool(bin_dir, name, f'exec {self.cat} "{FIXTURES / fixture}"\n')

    @staticmethod
    def env(*dirs: Path) -> dict[str, str]:
        """The current environment with PATH set to exactly ``dirs``."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join(str(d) for d in dirs)
        return env


@pytest.fixture
def kit() -> Kit:
    return Kit()
