"""``run`` judges the interpreter the command trains with, not its own.

Each attack is proven first with the real interpreter (the command really
imports other code), then refused by ``run``; each has a control that runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ENV, git, run_cli

PURELIB = sysconfig.get_paths()["purelib"]
SCRIPT = "scripts/clean_tickets.py"  # committed in the project: prints 'clean'


@pytest.fixture
def other_python(tmp_path: Path) -> Path:
    """Another venv that sees every package of ours, except a peft of another version
    placed before them (the way a second venv or a stale install shadows one)."""
    venv = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", where], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    (site / "ours.pth").write_text(PURELIB + "\n")
    (site / "peft").mkdir()
    (site / "peft" / "__init__.py").write_text("__version__ = '0.0.1'\n")
    meta = site / "peft-0.0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: peft\nVersion: 0.0.1\n")
    return venv / "bin" / "python"


def _run(
    project: Path, *command: str, options: tuple[str, ...] = (), **kw: object
) -> subprocess.CompletedProcess[str]:  # noqa: E501
    return run_cli("run", str(project), "--no-signature", *options, "--", *command,
                   cwd=kw.get("cwd", project.parent), env={**ENV, **dict(kw.get("env", {}))})  # type: ignore[arg-type]  # fmt: skip


def test_another_venvs_python_is_refused_for_its_packages(
    project: Path, other_python: Path
) -> None:
    proof = subprocess.run([str(other_python), "-c", "import peft; print(peft.__version__)"],
                           capture_output=True, text=True, env={**os.environ, **ENV})  # fmt: skip
    assert proof.stdout.strip() == "0.0.1"  # the attack matters: it imports another peft
    done = _run(project, str(other_python), SCRIPT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "clean" not in done.stdout  # the command never started
    assert "environment.packages.peft" in done.stderr and "0.0.1" in done.stderr
    assert str(other_python) in done.stderr and "reason: command-interpreter" in done.stderr


def test_the_pinned_interpreter_runs_the_same_script(project: Path) -> None:
    done = _run(project, sys.executable, SCRIPT)
    assert done.returncode == 0, done.stderr
    assert "clean" in done.stdout


def test_a_pythonpath_that_shadows_a_pinned_package_is_refused(
    project: Path, tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "peft-9.9.9.dist-info").mkdir(parents=True)
    (shadow / "peft-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: peft\nVersion: 9.9.9\n"
    )
    (shadow / "peft.py").write_text("__version__ = '9.9.9'\n")
    env = {"PYTHONPATH": str(shadow)}
    proof = subprocess.run([sys.executable, "-c", "import peft; print(peft.__version__)"],
                           capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip
    assert proof.stdout.strip() == "9.9.9"
    done = _run(project, "env", f"PYTHONPATH={shadow}", sys.executable, SCRIPT)
    assert done.returncode == 1 and "9.9.9" in done.stderr, done.stderr
    assert "clean" not in done.stdout


def test_python_m_from_a_second_worktree_is_refused(project: Path, tmp_path: Path) -> None:
    root = project.parent
    other = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(other))
    (other / "scripts" / "clean_tickets.py").write_text("print('other code')\n")
    proof = subprocess.run([sys.executable, "-m", "scripts.clean_tickets"], cwd=other,
                           capture_output=True, text=True)  # fmt: skip
    assert proof.stdout.strip() == "other code"
    done = _run(project, sys.executable, "-m", "scripts.clean_tickets", cwd=other)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "other code" not in done.stdout
    assert "outside the repository the manifest pins" in done.stderr
    assert "reason: script-not-pinned" in done.stderr and str(other / "scripts") in done.stderr
    control = _run(project, sys.executable, "-m", "scripts.clean_tickets", cwd=root)
    assert control.returncode == 0 and "clean" in control.stdout, control.stderr


def test_a_shell_string_is_refused_unless_guarded(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    shell = ("sh", "-c", f"cd {tmp_path} && touch {marker}")
    done = _run(project, *shell)
    assert done.returncode == 1 and not marker.exists()
    assert "reason: command-not-attributed" in done.stderr and "--guarded" in done.stderr
    guarded = _run(project, *shell, options=("--guarded",))
    assert guarded.returncode == 1, guarded.stderr  # it ran, but nothing verified itself
    assert marker.exists() and "no process of the command reported" in guarded.stderr
    ledger = project.parent / ".ftmanifest" / "ledger"
    records = [json.loads(p.read_text())["record"] for p in sorted(ledger.glob("*.json"))]
    assert records[-1]["status"] == "failed" and "no process" in records[-1]["reason"]


def test_a_guarded_command_whose_guard_reports_passes(project: Path, tmp_path: Path) -> None:
    script = tmp_path / "guarded.py"
    script.write_text(
        "import os\nfrom ftmanifest.ledger.guardreport import report_guarded\n"
        "report_guarded(os.environ['FTMANIFEST_DIGEST'])\nprint('trained')\n"
    )
    shell = ("sh", "-c", f"{sys.executable} {script}")
    done = _run(project, *shell, options=("--guarded",))
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout


def test_ftmanifest_guard_reports_to_a_guarded_run(project: Path, tmp_path: Path) -> None:
    """The real in-process guard, called first in a script a shell starts: it passes
    and says so to ``run``; without the call the same run is refused when it ends."""
    from ftmanifest.verify.lock import lock_manifest

    root = project.parent
    for name, first in (("guarded", "ftmanifest.guard(os.environ['FTMANIFEST_MANIFEST'], "
                         "signature=False)\n"), ("plain", "")):  # fmt: skip
        (root / "scripts" / f"{name}.py").write_text(
            f"import os, ftmanifest\n{first}print('trained')\n"
        )
    git(root, "add", "scripts")
    git(root, "commit", "-qm", "two training scripts")
    lock_manifest(project)  # the commit that holds them
    shell = ("sh", "-c", f"{sys.executable} scripts/guarded.py")
    done = _run(project, *shell, options=("--guarded",))
    assert "trained" in done.stdout, done.stderr
    assert done.returncode == 0, done.stderr
    plain = ("sh", "-c", f"{sys.executable} scripts/plain.py")
    unguarded = _run(project, *plain, options=("--guarded",))
    assert unguarded.returncode == 1 and "no process of the command reported" in unguarded.stderr


def test_a_sitecustomize_on_the_commands_pythonpath_is_refused(
    project: Path, tmp_path: Path
) -> None:
    """Start-up code the command's interpreter would run before the script: proven to
    run, then refused by run before the command starts."""
    hook = tmp_path / "hook"
    hook.mkdir()
    marker = tmp_path / "hooked"
    (hook / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    proof = subprocess.run(
        [sys.executable, "-c", "pass"], env={**os.environ, "PYTHONPATH": str(hook)}
    )
    assert proof.returncode == 0 and marker.exists()  # the attack matters: it runs first
    marker.unlink()
    done = _run(project, "env", f"PYTHONPATH={hook}", sys.executable, SCRIPT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "clean" not in done.stdout
    assert "PYTHONPATH" in done.stderr and "sitecustomize" in done.stderr


def test_an_unpinned_ld_preload_is_refused(project: Path) -> None:
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
                             "/usr/lib64/libm.so.6") if os.path.exists(p)), None)  # fmt: skip
    if libm is None:
        pytest.skip("no libm.so.6 at a known place to preload")
    done = _run(project, "env", f"LD_PRELOAD={libm}", sys.executable, SCRIPT)
    assert done.returncode == 1 and "LD_PRELOAD" in done.stderr, done.stderr
    assert "clean" not in done.stdout


def test_the_json_refusal_carries_the_interpreters_rows(project: Path, other_python: Path) -> None:
    """``run --format json``: the command-interpreter refusal lists its rows as
    every report does (field, expected, observed, hint), not only a message."""
    done = _run(project, str(other_python), SCRIPT, options=("--format", "json"))
    assert done.returncode == 1, done.stdout + done.stderr
    error = json.loads(done.stdout[done.stdout.rindex('{\n  "error"') :])["error"]
    assert error["reason"] == "command-interpreter"
    (peft,) = [f for f in error["findings"] if f["field"] == "environment.packages.peft"]
    assert "0.0.1" in peft["observed"] and peft["hint"]
