"""The ledger's story told through the real CLI, in a git repository holding a
lockable project: a baseline run that completes, a variant of it that
completes, a run stopped by SIGINT (abandoned, with the reason given up
front), and a run whose command fails.  ``ledger list`` then shows all four
attempts with their outcome and reason, counted; ``ledger check`` passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ENV, run_cli, within, write_project
from tests.ledger.conftest import ftmanifest_cmd, ledger_cli

BASE_ID, VARIANT_ID = "docroute-lora-r16", "docroute-lora-r32"
REASON = "wrong learning rate, restarting with 1e-4"


def _variant_text(baseline: str) -> str:
    """The locked baseline with the experiment renamed, its parent named and
    the one change it makes (LoRA rank and alpha) declared and made."""
    text = baseline
    for old, new in (
        (f"  id: {BASE_ID}\n",
         f"  id: {VARIANT_ID}\n  parent: {BASE_ID}\n"
         "  changes:\n    method.r: 32\n    method.alpha: 64\n"),
        ("  r: 16\n", "  r: 32\n"),
        ("  alpha: 32\n", "  alpha: 64\n"),
    ):  # fmt: skip
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A committed project with the baseline and its variant, both locked on
    the same clean commit.  Both manifests are git-ignored so that neither is
    "dirty code" for the other (each verifies the tree it was locked on)."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    root.mkdir()
    baseline = write_project(root, {".gitignore": "out/\n/exp.yaml\n/variant.yaml\n"})
    variant = root / "variant.yaml"
    variant.write_text(_variant_text(baseline.read_text()))
    return baseline, variant


def _run(manifest: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", str(manifest), "--no-signature", "--", *cmd, cwd=manifest.parent)


TRUE = (sys.executable, "-c", "pass")  # a Python command: run probes its interpreter


def _as_a_shell_starts_it() -> None:
    """SIGINT and SIGTERM at their defaults: a test worker may have inherited them
    ignored, which exec passes on, and a run started so rightly passes nothing on."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _interrupt(manifest: Path, sig: int, *options: str) -> tuple[int, str, str]:
    """Start a run whose command says "ready" then sleeps; once it is ready
    (its stdout is the run's stdout), send ``sig`` to ``ftmanifest`` itself."""
    child = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen(
        ftmanifest_cmd("run", str(manifest), "--no-signature", "--grace", "20", *options,
                       "--", sys.executable, "-c", child),
        cwd=manifest.parent, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=_as_a_shell_starts_it,
    )  # fmt: skip
    try:
        stdout = proc.stdout
        assert stdout is not None

        def wait_ready() -> list[str]:
            seen = []
            for line in stdout:
                seen.append(line)
                if line.strip() == "ready":
                    break
            return seen

        seen = within(60, wait_ready)
        if not seen or seen[-1].strip() != "ready":
            proc.kill()
            raise AssertionError("".join(seen) + proc.communicate()[1])
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=150)  # the command sleeps 60 s if never told
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + out, err


def test_baseline_variant_abandoned_and_failed_runs_are_all_in_the_ledger(
    repo: tuple[Path, Path],
) -> None:
    baseline, variant = repo
    root = baseline.parent
    ledger = root / ".ftmanifest" / "ledger"

    done = _run(baseline, *TRUE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: no drift" in done.stdout
    done = _run(variant, *TRUE)
    assert done.returncode == 0, done.stdout + done.stderr  # the variant is fair to its parent
    code, out, err = _interrupt(variant, signal.SIGINT, "--abandon-reason", REASON)
    assert code == 130, out + err
    failed = _run(baseline, sys.executable, "-c", "raise SystemExit(3)")
    assert failed.returncode == 3, failed.stdout + failed.stderr

    listed = ledger_cli(ledger, "list", "--format", "json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    data: dict[str, Any] = json.loads(listed.stdout)
    assert data["ledger"] == str(ledger) and data["problems"] == []
    rows = [(a["experiment"], a["parent"], a["status"], a["reason"]) for a in data["attempts"]]
    assert rows == [
        (BASE_ID, None, "completed", None),
        (VARIANT_ID, BASE_ID, "completed", None),
        (VARIANT_ID, BASE_ID, "abandoned", REASON),
        (BASE_ID, None, "failed", "exit status 3"),
    ]
    assert data["counts"] == {"completed": 2, "abandoned": 1, "failed": 1}
    assert len({a["attempt"] for a in data["attempts"]}) == 4
    for a in data["attempts"]:
        assert len(a["records"]) == 2  # started, then the end
        assert a["started_at"] and a["ended_at"] and a["budget_used"]["hours"] is not None

    # the records say what ran, and how it ended
    show = ledger_cli(ledger, "show", data["attempts"][2]["attempt"], "--format", "json")
    assert show.returncode == 0, show.stdout + show.stderr
    started, ended = json.loads(show.stdout)["records"]
    assert started["status"] == "started" and started["manifest"]["path"] == "variant.yaml"
    assert started["manifest"]["body"]["experiment"]["changes"] == {
        "method.r": 32,
        "method.alpha": 64,
    }
    assert (ended["status"], ended["signal"], ended["exit_code"]) == ("abandoned", "SIGINT", 130)
    assert ended["reason"] == REASON and "body" not in ended["manifest"]
    show = ledger_cli(ledger, "show", data["attempts"][3]["attempt"], "--format", "json")
    ended = json.loads(show.stdout)["records"][-1]
    assert (ended["status"], ended["exit_code"]) == ("failed", 3)
    assert ended["command"] == [sys.executable, "-c", "raise SystemExit(3)"]

    text = ledger_cli(ledger, "list")
    assert text.returncode == 0
    assert "4 attempt(s): 1 abandoned, 2 completed, 1 failed" in text.stdout
    assert f"reason: {REASON}" in text.stdout and "reason: exit status 3" in text.stdout
    family = ledger_cli(ledger, "list", "--family", VARIANT_ID, "--format", "json")
    assert len(json.loads(family.stdout)["attempts"]) == 4
    only = ledger_cli(ledger, "list", "--experiment", VARIANT_ID, "--format", "json")
    assert json.loads(only.stdout)["counts"] == {"completed": 1, "abandoned": 1}

    check = ledger_cli(ledger, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ledger ok: 8 record(s)" in check.stdout
    # found from the current folder's repository too, without --ledger
    here = run_cli("ledger", "check", cwd=root / "data")
    assert here.returncode == 0 and "ledger ok: 8 record(s)" in here.stdout, here.stderr
    assert os.listdir(ledger) and all(n.endswith(".json") for n in os.listdir(ledger))


def test_a_lone_reason_is_the_abandon_reason_and_the_signal_is_the_default(
    repo: tuple[Path, Path],
) -> None:
    """A lone ``--reason`` (no ``--accept``) is the abandon reason; with none
    (and no terminal to ask), the reason is the signal's name."""
    baseline, _ = repo
    code, out, err = _interrupt(baseline, signal.SIGTERM, "--reason", "node drained")
    assert code == 143, out + err
    code, out, err = _interrupt(baseline, signal.SIGTERM)
    assert code == 143, out + err
    ledger = baseline.parent / ".ftmanifest" / "ledger"
    data = json.loads(ledger_cli(ledger, "list", "--format", "json").stdout)
    rows = [(a["status"], a["reason"]) for a in data["attempts"]]
    assert rows == [("abandoned", "node drained"), ("abandoned", "stopped by SIGTERM")]


def test_a_command_argument_that_is_not_utf8_runs_and_is_recorded(
    repo: tuple[Path, Path],
) -> None:
    """A file name in latin-1 on the command line reaches Python as a lone
    surrogate; the record keeps it as an escape instead of crashing the run
    before the command starts."""
    baseline, _ = repo
    arg = os.fsdecode(b"caf\xe9.txt")
    done = _run(baseline, sys.executable, "-c", "import sys; assert sys.argv[1]", arg)
    assert done.returncode == 0, done.stdout + done.stderr
    ledger = baseline.parent / ".ftmanifest" / "ledger"
    data = json.loads(ledger_cli(ledger, "list", "--format", "json").stdout)
    (row,) = data["attempts"]
    assert row["status"] == "completed"
    show = json.loads(ledger_cli(ledger, "show", row["attempt"], "--format", "json").stdout)
    assert show["records"][0]["command"][-1] == "caf\\xe9.txt"
    assert ledger_cli(ledger, "check").returncode == 0
