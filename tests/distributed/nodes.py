"""Test support: a real two-node ``torchrun`` job on one machine.

Two agents, ``torchrun --nnodes 2 --nproc-per-node 2`` each, meet at a loopback
c10d rendezvous.  Each agent runs in its own UTS and mount namespace
(``unshare --uts --mount``): its own host name (``node-a``, ``node-b``) and,
where a test asks for it, its own copy of a folder bound over the path both
nodes are given (the same path, a different view per node, as two hosts with
local disks).  That needs root; without it the tests skip, saying so.

Ranks run ``launch.VERIFY_SCRIPT`` with ``real_exit``: each rank exits with
the code its command returned, so the agents' own handling of a failing rank
(SIGTERM to the node's slower ranks) is part of what is tested.  The rank
script's files land in the job folder, named by global rank; ``host-N`` says
which node that rank ran on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.launch import TORCHRUN, VERIFY_SCRIPT, RankResult, two_rank_example

HOSTS = ("node-a", "node-b")

NODE_SCRIPT = (
    """import os, socket
with open(os.path.join(os.environ["FTM_OUT"], "host-" + os.environ["RANK"]), "w") as f:
    f.write(socket.gethostname())
"""
    + VERIFY_SCRIPT
)


def can_make_nodes() -> str | None:
    """Why two simulated nodes cannot be made here, or None when they can."""
    if shutil.which("unshare") is None:
        return "no unshare(1) here: two nodes need their own UTS and mount namespaces"
    if os.geteuid() != 0:
        return "not root: unshare --uts --mount (a host name and a view per node) needs root"
    probe = subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare --uts --mount is refused here: {probe.stderr.decode()[:200]}"
    return None


needs_nodes = pytest.mark.skipif(can_make_nodes() is not None, reason=str(can_make_nodes()))


@dataclass
class NodesResult:
    rcs: list[int]  # each agent's (torchrun's) exit status, node-a first
    logs: list[str]
    elapsed: float
    ranks: dict[int, RankResult] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)

    def codes(self) -> dict[int, int | None]:
        return {r: res.rc for r, res in self.ranks.items()}

    def on(self, host: str) -> list[int]:
        """The ranks that ran on ``host``."""
        return sorted(r for r, h in self.hosts.items() if h == host)

    @property
    def log(self) -> str:
        pairs = zip(HOSTS, self.logs, strict=False)
        return "\n".join(f"--- agent {h} ---\n{t[-3000:]}" for h, t in pairs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def two_nodes(
    folder: Path,
    argv: list[str],
    *,
    views: dict[int, dict[Path, Path]] | None = None,
    env: dict[int, dict[str, str]] | None = None,
    argv_b: list[str] | None = None,
    start_b: bool = True,
    timeout: float = 120.0,
) -> NodesResult:
    """``ftmanifest <argv>`` on 2 nodes x 2 ranks.  ``views[n]``: {what to show: where}
    bound on node ``n`` (0: node-a, 1: node-b); ``env[n]``: variables of node ``n``'s
    ranks; ``argv_b``: another command line for node-b; ``start_b=False``: node-b
    never starts."""
    folder.mkdir(parents=True, exist_ok=True)
    main = folder / "ftm_rank_main.py"
    main.write_text(NODE_SCRIPT, encoding="utf-8")
    port = _free_port()
    procs, logs = [], []
    started = time.monotonic()
    for n, host in enumerate(HOSTS if start_b else HOSTS[:1]):
        binds = "".join(
            f"mount --bind {src} {dst} && " for src, dst in (views or {}).get(n, {}).items()
        )
        run = [
            str(TORCHRUN), "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=ftm", "--local-addr=127.0.0.1",
            "--monitor-interval=0.1", str(main),
        ]  # fmt: skip
        script = f"hostname {host} && {binds}exec " + " ".join(run)
        spec = {r: {"real_exit": True} for r in map(str, range(4))}
        full = {
            **os.environ,
            "FTM_OUT": str(folder),
            "FTM_ARGV": json.dumps(argv_b if (argv_b and n == 1) else argv),
            "FTM_RANK_SPEC": json.dumps(spec),
            "COLUMNS": "250",
            "FTMANIFEST_CACHE_DIR": str(folder / f"cache-{host}"),  # a cache per host
            **(env or {}).get(n, {}),
        }
        full.pop("WORLD_SIZE", None)
        log = (folder / f"agent-{host}.log").open("w")
        logs.append(log)
        cmd = ["unshare", "--uts", "--mount", "--fork", "sh", "-c", script]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=folder,
                env=full,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
        time.sleep(0.3)  # node-a's agent first: it gets the lower pid, so node rank 0
    rcs = []
    try:
        for p in procs:
            left = max(1.0, timeout - (time.monotonic() - started))
            rcs.append(p.wait(timeout=left))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the agents ran past {timeout} s:\n{_logs(folder)}") from None
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()
    result = NodesResult(rcs, _logs(folder, split=True), time.monotonic() - started)
    for rank in range(4):
        rc, host = folder / f"rc-{rank}", folder / f"host-{rank}"
        result.ranks[rank] = RankResult(
            int(rc.read_text()) if rc.exists() else None,
            _read(folder / f"out-{rank}.txt"),
            _read(folder / f"err-{rank}.txt"),
        )
        if host.exists():
            result.hosts[rank] = host.read_text()
    return result


def _logs(folder: Path, split: bool = False) -> Any:
    texts = [_read(folder / f"agent-{h}.log") for h in HOSTS]
    return texts if split else "\n".join(texts)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def exit_statuses(log: str) -> dict[int, int]:
    """{rank: exit status} from an agent's failure summary (ranks it saw fail)."""
    import re

    found = re.findall(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", log)
    return {int(r): int(c) for r, c in found}


def four_rank_example(folder: Path) -> Path:
    """The tiny example for a job of two nodes of two ranks, locked to this machine."""
    return two_rank_example(folder, world_size=4, nodes=2)
