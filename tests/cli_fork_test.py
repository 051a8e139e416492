"""The CLI fork server answers as a fresh interpreter does, and survives its children."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, _cli_env, run_cli_forked
from tests.conftest import run_cli_fresh as run_cli
from tests.support import cli_fork


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fork")
    template = base / "template.yaml"
    assert run_cli("init", str(template)).returncode == 0
    clean = base / "clean.txt"
    clean.write_text("nothing to see\n")
    fifo = base / "fifo.yaml"
    os.mkfifo(fifo)
    (base / "folder").mkdir()
    return {"base": base, "template": template, "clean": clean, "fifo": fifo}


def _server() -> cli_fork.ForkServer:
    return cli_fork.server(_cli_env, str(ROOT))


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


CASES: dict[str, tuple[list[str], dict[str, str], bool]] = {
    # id -> (argv with {name} for a file, env, run in the files' folder)
    "help": (["--help"], {}, False),
    "command-help": (["scan", "--help"], {}, False),
    "no-command": ([], {}, False),
    "unknown-command": (["frobnicate"], {}, False),
    "lint-refusal": (["lint", "{template}"], {}, False),
    "lint-json": (["lint", "--format", "json", "{template}"], {}, False),
    "lint-missing": (["lint", "{base}/absent.yaml"], {}, False),
    "bad-option": (["lint", "--form", "json", "{template}"], {}, False),
    "bad-value": (["scan", "{clean}", "--jobs", "-1"], {}, False),
    "env-engine": (["scan", "--no-cache", "{clean}"], {"FTMANIFEST_SCAN_ENGINE": "bogus"}, False),
    "relative-path": (["digest", "template.yaml"], {}, True),
    "relative-missing": (["verify", "absent.yaml", "--no-signature"], {}, True),
    "diff": (["diff", "{template}", "{template}"], {}, False),
    "schema": (["schema"], {}, False),
    "folder-as-manifest": (["export", "{base}/folder", "--format", "cyclonedx"], {}, False),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_forked_run_matches_a_fresh_interpreter(case: str, files: dict[str, Path]) -> None:
    argv, env, in_folder = CASES[case]
    args = [a.format(**files) for a in argv]
    cwd = files["base"] if in_folder else None
    fresh = run_cli(*args, cwd=cwd, env=env)
    forked = run_cli_forked(*args, cwd=cwd, env=env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )
    assert forked.args == fresh.args
    assert not _server().unsound(_cli_env(env))  # it really was forked


def test_a_blocked_child_times_out_and_its_group_is_killed(files: dict[str, Path]) -> None:
    """The CLI refuses FIFOs, so the entry here opens one itself, after starting a
    grandchild in its process group: the timeout ends both and the server goes on.
    The entry imports nothing heavy, and 5 s lets a loaded machine reach the FIFO."""
    server = _server()
    pid_file = files["base"] / "grandchild.pid"
    code, out, err, timed_out = server.call(
        [str(files["fifo"]), str(pid_file)],
        _cli_env(),
        str(ROOT),
        timeout=5,
        entry="tests.support.cli_fork:block_on_fifo",
    )
    assert timed_out and code == -signal.SIGKILL, (code, out, err)
    assert _children(server.pid) == []
    grandchild = int(pid_file.read_text())
    for _ in range(500):  # SIGKILL reaches the grandchild after the child's wait returns
        if _state(grandchild) in ("gone", "Z"):
            break
        time.sleep(0.01)
    assert _state(grandchild) in ("gone", "Z")
    assert run_cli_forked("--version").returncode == 0  # the server goes on


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_a_child_that_raises_or_aborts_leaves_the_server_serving() -> None:
    server = _server()
    code, out, err, timed_out = server.call(
        [], _cli_env(), str(ROOT), 30, entry="tests.support.cli_fork:boom"
    )
    assert (code, out, timed_out) == (1, b"", False)
    assert b"Traceback" in err and b"RuntimeError: boom in the entry" in err
    code, _, _, _ = server.call([], _cli_env(), str(ROOT), 30, entry="os:abort")
    assert code == -signal.SIGABRT
    assert run_cli_forked("--version").stdout.startswith("ftmanifest ")


def test_two_hundred_requests_leak_no_descriptor_or_child() -> None:
    """The server's side (fork, pipes, wait) is the same for any entry: most of the
    requests call a cheap one, to keep the test fast."""
    server = _server()
    run_cli_forked("--version")
    before = sorted(os.listdir(f"/proc/{server.pid}/fd"))
    for i in range(200):
        if i % 20 == 0:
            assert run_cli_forked("--version").returncode == 0
        else:
            assert server.call([], _cli_env(), str(ROOT), 30, entry="os:getpid")[0] == 0
    assert sorted(os.listdir(f"/proc/{server.pid}/fd")) == before
    assert _children(server.pid) == []


def test_an_environment_read_at_import_is_not_forked() -> None:
    server = _server()
    assert server.import_env  # the record works: the imports read some (e.g. LANG)
    env = _cli_env()
    for key in ("PYTHONHASHSEED", "LC_ALL", "TMPDIR", sorted(server.import_env)[0]):
        assert server.unsound({**env, key: "changed"}) == {key}
        assert server.unsound({k: v for k, v in env.items() if k != key} | {key: "x"}) == {key}
    assert not server.unsound({**env, "FTMANIFEST_SCAN_ENGINE": "bogus"})  # control


def test_the_width_argparse_reads_while_the_parser_is_built_is_not_kept() -> None:
    """``add_argument`` builds a help formatter that reads ``COLUMNS`` and is dropped:
    such reads are not recorded, so a call with its own width forks.  The forked help
    is the fresh interpreter's at each width; a direct read is still recorded."""
    server = _server()
    assert "COLUMNS" not in server.import_env and "LINES" not in server.import_env
    widths = set()
    for columns in ("40", "200"):
        env = {"COLUMNS": columns}
        assert not server.unsound({**_cli_env(), **env})
        forked = run_cli_forked("verify", "--help", env=env)
        fresh = run_cli("verify", "--help", env=env)
        assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)
        widths.add(max(len(line) for line in forked.stdout.splitlines()))
    assert len(widths) == 2  # the width changed what was printed
    with cli_fork._env_reads() as (keys, _copied):
        argparse.HelpFormatter(prog="x")
        assert not keys
        os.environ.get("COLUMNS")  # a direct read, as a module that keeps it makes
    assert keys == {"COLUMNS"}
    with cli_fork._env_reads() as (keys, _copied):
        shutil.get_terminal_size()  # a module keeping the size it read at import
    assert keys == {"COLUMNS", "LINES"}


def test_an_unsound_environment_runs_a_fresh_interpreter(tmp_path: Path) -> None:
    """PYTHONPATH is read at start-up (here: a ``sitecustomize`` that speaks), so the
    call runs a fresh interpreter, which shows it; a fork could not."""
    (tmp_path / "sitecustomize.py").write_text("import sys; sys.stderr.write('started\\n')\n")
    result = run_cli_forked("--version", env={"PYTHONPATH": str(tmp_path)})
    assert (result.returncode, result.stderr) == (0, "started\n")
