"""Test support: a real ``torchrun --standalone`` job, every rank's exit code and output.

Each job runs in a subprocess with a wall-clock limit, from the test's own
folder (no stray ``.py`` file there can shadow the standard library), on a
port the c10d rendezvous picks (``--standalone``: ``localhost:0``), so tests
running side by side (``pytest -n 2``) never share one.

The rank script is written into that folder.  ``VERIFY_SCRIPT`` runs the CLI
as ``python -m ftmanifest`` would (``cli.main``), after applying the rank's
own entry of ``ranks`` (``{"1": {"env": {...}, "sleep": S}}``); ``{rank}`` in
an argument becomes the rank, so each rank can read its own copy of a
project.  It writes ``rc-N``, ``out-N.txt``, ``err-N.txt`` and exits 0 (so
torchrun never stops a rank that is still printing), unless the rank's
entry says ``"real_exit": true``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TORCHRUN = Path(sys.executable).with_name("torchrun")

VERIFY_SCRIPT = """\
import contextlib, json, os, sys, time

rank = os.environ["RANK"]
spec = json.loads(os.environ["FTM_RANK_SPEC"]).get(rank, {})
os.environ.update(spec.get("env", {}))
time.sleep(spec.get("sleep", 0))
argv = [a.replace("{rank}", rank) for a in json.loads(os.environ["FTM_ARGV"])]
folder = os.environ["FTM_OUT"]
from ftmanifest.cli import main

with open(f"{folder}/out-{rank}.txt", "w") as out, open(f"{folder}/err-{rank}.txt", "w") as err:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
with open(f"{folder}/rc-{rank}", "w") as f:
    f.write(str(code))
sys.exit(code if spec.get("real_exit") else 0)
"""


@dataclass
class RankResult:
    rc: int | None  # None: the rank never finished (killed, or still waiting)
    out: str
    err: str


@dataclass
class JobResult:
    rc: int  # torchrun's own exit status
    elapsed: float
    log: str  # torchrun's combined stdout and stderr
    ranks: dict[int, RankResult] = field(default_factory=dict)

    def codes(self) -> dict[int, int | None]:
        return {r: res.rc for r, res in self.ranks.items()}


def torchrun(
    folder: Path,
    script: str,
    *,
    nproc: int = 2,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    timeout: float = 120.0,
) -> JobResult:
    """Run ``script`` (text) on ``nproc`` ranks from ``folder``; collect every rank's files."""
    folder.mkdir(parents=True, exist_ok=True)
    main = folder / "ftm_rank_main.py"
    main.write_text(script, encoding="utf-8")
    full = {**os.environ, "FTM_OUT": str(folder), **(env or {})}
    full.pop("WORLD_SIZE", None)
    cmd = [str(TORCHRUN), "--standalone", f"--nproc-per-node={nproc}", str(main), *(args or [])]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=folder,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        raise AssertionError(f"torchrun ran past {timeout} s:\n{log[-4000:]}") from None
    result = JobResult(proc.returncode, time.monotonic() - started, log)
    for rank in range(nproc):
        rc = folder / f"rc-{rank}"
        result.ranks[rank] = RankResult(
            int(rc.read_text()) if rc.exists() else None,
            _read(folder / f"out-{rank}.txt"),
            _read(folder / f"err-{rank}.txt"),
        )
    return result


def verify_job(
    folder: Path,
    argv: list[str],
    ranks: dict[str, dict[str, Any]] | None = None,
    *,
    timeout: float = 120.0,
) -> JobResult:
    """``ftmanifest <argv>`` on two ranks, each with its entry of ``ranks`` applied
    (tables 250 columns wide, so each row is one line)."""
    env = {
        "FTM_ARGV": json.dumps(argv),
        "FTM_RANK_SPEC": json.dumps(ranks or {}),
        "COLUMNS": "250",  # table rows on one line each
    }
    return torchrun(folder, VERIFY_SCRIPT, env=env, timeout=timeout)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def two_rank_example(folder: Path, *, world_size: int = 2, nodes: int = 1) -> Path:
    """The tiny example for a job of two ranks on one node (or ``world_size`` ranks on
    ``nodes`` nodes), locked to this machine."""
    from ftmanifest.examples.project import build_example
    from ftmanifest.verify.lock import lock_manifest

    manifest = build_example(folder, arch="llama", seed=0)
    text = manifest.read_text("utf-8")
    manifest.write_text(
        text + f"\ndistributed:\n  strategy: ddp\n  world_size: {world_size}\n  nodes: {nodes}\n",
        "utf-8",
    )
    lock_manifest(manifest)
    return manifest
