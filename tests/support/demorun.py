"""Run the demo (manifests/demo.sh) in a clean environment, and prove a log is this tree's.

The tutorial test compares the docs with the demo's full log.  Running the demo
takes minutes, and CI has just run it (`make demo`) before the tests.  A log may
stand in for a new run only when it provably came from the same inputs: the
demo ran through ``main`` below, which stamps ``demo-out/stamp.json`` with

- the digest of every file a clone would hold (tracked, plus untracked files git
  does not ignore), taken before and after the demo and equal both times;
- the Python version and every installed distribution's version;
- the digest of the log itself;

and wrote it only when the demo succeeded.  The test takes the log when the
stamp matches the tree, the Python and the packages it sees now (its own
environment may hold more packages: the dev extras), and runs the demo again
otherwise.  The demo runs with the same scrubbed environment either way.

    python -m tests.support.demorun [--verbose]   # as `make demo` runs demo.sh
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STAMP = "stamp.json"
# What a copy of the project leaves out when the project is not a git checkout.
_NOT_COPIED = {".venv", ".git", "demo-out", ".pytest_cache", ".hypothesis", "__pycache__",
               ".mypy_cache", ".ruff_cache", "build", "dist"}  # fmt: skip


def demo_env(scratch: Path) -> dict[str, str]:
    """The demo's environment: this interpreter's tools first, a private HOME and cache."""
    env = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR", "VERBOSE")}
    env.update({
        # the caller's PATH last: tools installed elsewhere (Homebrew's age, git) stay found
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
            + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
        ),
        "HOME": str(scratch / "home"),
        "FTMANIFEST_CACHE_DIR": str(scratch / "cache"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HF_HUB_OFFLINE": "1",
        # no PYTHONPATH: run and the guard refuse a start-up variable the manifest does not pin;
        # the installed (editable) ftmanifest is this same code
    })  # fmt: skip
    return env


def clone_files(root: Path) -> list[str] | None:
    """The files a clone of ``root`` holds (plus untracked files git does not ignore),
    relative and sorted; None when ``root`` is not a git checkout."""
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    done = subprocess.run(
        ["git", "-c", f"safe.directory={root}", "ls-files", "-z", "--cached", "--others",
         "--exclude-standard"],
        cwd=root, capture_output=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    return sorted({p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def copy_project(root: Path, dest: Path) -> None:
    """Copy the project as a clone would hold it: no virtual environments, caches or
    other ignored output (CI's demo venv alone is over a gigabyte)."""
    files = clone_files(root)
    if files is None:
        shutil.copytree(root, dest, symlinks=True,
                        ignore=lambda _d, names: [n for n in names if n in _NOT_COPIED
                                                  or n.startswith(".venv")])  # fmt: skip
        return
    for rel in files:
        source = root / rel
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the work tree, not yet in git
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / rel, follow_symlinks=False)


def tree_digest(root: Path) -> str | None:
    """sha256 over the path, kind and content of every file ``clone_files`` lists."""
    files = clone_files(root)
    if files is None:
        return None
    h = hashlib.sha256()
    for rel in files:
        path = root / rel
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            h.update(b"deleted\0")
            continue
        if stat.S_ISLNK(mode):
            h.update(b"link\0" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
        else:
            kind = b"exec\0" if mode & 0o111 else b"file\0"
            h.update(kind + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\0")
    return "sha256:" + h.hexdigest()


@functools.cache
def packages() -> dict[str, str]:
    """Every installed distribution's version, by normalised name (read once a process)."""
    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            out[name] = dist.version
    return out


def _log_digest(out: Path) -> str:
    return "sha256:" + hashlib.sha256((out / "demo.log").read_bytes()).hexdigest()


def reusable_log(root: Path) -> str | None:
    """The demo's log in ``root``/demo-out when its stamp proves it came from the tree,
    Python and package versions seen now; None when it does not (run the demo again)."""
    out = root / "demo-out"
    try:
        stamp: Any = json.loads((out / STAMP).read_text("utf-8"))
        log = (out / "demo.log").read_text("utf-8")
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or not isinstance(stamp.get("packages"), dict):
        return None
    now = packages()
    same = (
        stamp.get("tree") is not None
        and stamp.get("tree") == tree_digest(root)
        and stamp.get("python") == sys.version
        and stamp.get("root") == str(root)
        and stamp.get("log") == _log_digest(out)
        and all(now.get(name) == version for name, version in stamp["packages"].items())
    )
    return log if same else None


def run(
    root: Path, scratch: Path, *args: str, capture: bool, timeout: float | None = 900
) -> subprocess.CompletedProcess[str]:
    """Run manifests/demo.sh in ``root`` in ``demo_env`` (``make demo`` waits as long as
    it takes; a test gives up after ``timeout`` seconds)."""
    (scratch / "home").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["bash", "manifests/demo.sh", *args], cwd=root, env=demo_env(scratch),
        capture_output=capture, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def installed_ftmanifest() -> Path | None:
    """The ftmanifest package the demo's commands import: this interpreter's, asked in
    a fresh process outside the tree (so the current folder cannot stand in for it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import ftmanifest; print(ftmanifest.__file__)"],
        cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return Path(done.stdout.strip()).resolve().parent if done.returncode == 0 else None


def write_stamp(root: Path, before: str | None, ftmanifest_at: Path | None = None) -> bool:
    """Stamp ``root``/demo-out after a successful demo that started on the tree whose
    digest is ``before``; False (no stamp) when the tree changed meanwhile or the
    ftmanifest the demo imported (``installed_ftmanifest``) is not the one in ``root``."""
    if before is None or tree_digest(root) != before:
        return False
    at = installed_ftmanifest() if ftmanifest_at is None else ftmanifest_at
    if at is None or at.resolve() != (root / "ftmanifest").resolve():
        return False
    out = root / "demo-out"
    stamp = {"tree": before, "python": sys.version, "root": str(root),
             "log": _log_digest(out), "packages": packages()}  # fmt: skip
    (out / STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n", "utf-8")
    return True


def main(argv: list[str]) -> int:
    """Run the demo here; stamp its log when it succeeded (see ``write_stamp``)."""
    before = tree_digest(ROOT)
    with tempfile.TemporaryDirectory(prefix="ftm-demo-") as scratch:
        code = run(ROOT, Path(scratch), *argv, capture=False, timeout=None).returncode
    if code == 0 and not write_stamp(ROOT, before):
        print(
            "demo-out/ is not stamped: the tree changed while the demo ran, or the "
            "installed ftmanifest is not this tree's; the tests will run the demo again"
        )
    return code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # Ctrl-C reached the demo too: end as a shell would
        sys.exit(130)
