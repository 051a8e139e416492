"""Which interpreter a command will run: found on the command's PATH, through a
``#!`` line for console scripts, or not attributed (a shell string, a binary)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ftmanifest.verify.launch import attribute

VENV_BIN = Path(sys.executable).parent


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def bins(tmp_path: Path) -> Path:
    """A folder with a ``python`` that is this interpreter, first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python").symlink_to(sys.executable)
    return folder


def test_python_is_the_one_on_the_commands_path_not_ours(bins: Path, tmp_path: Path) -> None:
    env = {"PATH": f"{bins}{os.pathsep}{VENV_BIN}"}
    launch = attribute(["python", "train.py", "--lr", "1"], env, tmp_path)
    assert launch.interpreter == bins / "python"
    assert launch.script == tmp_path / "train.py"
    other = attribute(["python", "train.py"], {"PATH": str(VENV_BIN)}, tmp_path)
    assert other.interpreter == VENV_BIN / "python"  # the control: another PATH, another python


def test_options_module_and_env_assignments(bins: Path, tmp_path: Path) -> None:
    env = {"PATH": str(bins)}
    launch = attribute(["env", "A=1", "python", "-u", "-X", "dev", "-Im", "train"], env, tmp_path)
    assert launch.interpreter == bins / "python"
    assert launch.options == ("-u", "-X", "dev", "-I")
    assert launch.module == "train" and launch.script is None
    assert launch.env == {"A": "1"}
    assert attribute(["python", "-c", "print(1)"], env, tmp_path).code
    assert attribute(["python", "-W", "error", "t.py"], env, tmp_path).script == tmp_path / "t.py"


def test_a_console_script_runs_under_its_shebang_interpreter(bins: Path, tmp_path: Path) -> None:
    script = _exe(bins / "torchrun", f"#!{sys.executable}\nimport sys\n")
    launch = attribute(["torchrun", "--nproc-per-node", "2", "train.py"], {"PATH": str(bins)},
                       tmp_path)  # fmt: skip
    assert launch.interpreter == Path(sys.executable)
    assert launch.script == script
    env_line = _exe(bins / "launch", "#!/usr/bin/env python\nimport sys\n")
    launch = attribute(["launch"], {"PATH": str(bins)}, tmp_path)
    assert launch.interpreter == bins / "python" and launch.script == env_line


@pytest.mark.parametrize(
    "command",
    [
        ["sh", "-c", "cd elsewhere && python train.py"],
        ["bash", "train.sh"],
        ["env", "-i", "python", "train.py"],
        ["no-such-program", "x"],
        ["true"],
    ],
)
def test_what_cannot_be_attributed_says_why(command: list[str], tmp_path: Path) -> None:
    launch = attribute(command, {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert launch.interpreter is None and launch.why
