"""The code pin by content: a repository of N tracked files, first and second check.

  .venv/bin/python benchmarks/bench_code_content.py [--files 5000] [--repeat 3]

Builds the tiny example inside a git repository with ``--files`` tracked source
files (about 1.5 KiB each, 100 to a folder, dated an hour back so the stat
cache may keep them), commits it, locks and commits the manifest, then times
in one run, with a private stat cache:

1. the code check alone (``probe.git_content.compare_worktree`` against HEAD,
   in this process): with an empty stat cache (every file read and hashed),
   then again (one ``lstat`` and a cached blob id per file); ``git status
   --porcelain`` (what the check was before: git's index, not the bytes) is
   the reference;
2. ``ftmanifest verify`` as a whole process, the stat cache emptied before the
   first run, then the second run (target: the second under 1 s more than
   verifying the same project with its code in a one-file repository).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import installed_env, print_table  # noqa: E402

HOUR_NS = 3600 * 10**9
GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.org",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True,
                   capture_output=True)  # fmt: skip


def make_repo(root: Path, files: int, env: dict[str, str]) -> Path:
    """The tiny example plus ``files`` source files, committed, locked, committed."""
    from ftmanifest.examples.project import build_example

    manifest = build_example(root)
    old = time.time_ns() - HOUR_NS
    body = "".join(f"def f{i}(x):\n    return x * {i}  # padding padding padding\n"
                   for i in range(24))  # fmt: skip
    for i in range(files):
        path = root / "src" / f"pkg{i // 100:03d}" / f"mod{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\n{body}")
        os.utime(path, ns=(old, old))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "code")
    lock = subprocess.run([sys.executable, "-m", "ftmanifest", "lock", str(manifest)], env=env,
                          capture_output=True, text=True)  # fmt: skip
    if lock.returncode != 0:
        sys.exit(f"lock failed:\n{lock.stdout}\n{lock.stderr}")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "lock")
    return manifest


def timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def verify_s(manifest: Path, env: dict[str, str]) -> float:
    argv = [sys.executable, "-m", "ftmanifest", "verify", str(manifest), "--no-signature"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"verify failed:\n{done.stdout}\n{done.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from ftmanifest import statcache
    from ftmanifest.probe._context import ProbeContext
    from ftmanifest.probe.git_content import compare_worktree

    with tempfile.TemporaryDirectory(prefix="ftm-bench-code-") as tmp:
        cache = Path(tmp) / "cache"
        env = installed_env({**os.environ, **GIT_ENV, "FTMANIFEST_CACHE_DIR": str(cache)})
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        big = make_repo(Path(tmp) / "big", args.files, env)
        small = make_repo(Path(tmp) / "small", 1, env)
        os.environ["FTMANIFEST_CACHE_DIR"] = str(cache)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=big.parent, text=True,
                              capture_output=True, check=True).stdout.strip()  # fmt: skip
        ctx = ProbeContext(environ={**os.environ, **GIT_ENV})
        check = lambda: compare_worktree(big.parent, head, ctx=ctx)  # noqa: E731
        status = lambda: git(big.parent, "status", "--porcelain")  # noqa: E731
        first, second, ref, v1, v2, vs = [], [], [], [], [], []
        for _ in range(args.repeat):
            shutil.rmtree(cache, ignore_errors=True)
            first.append(timed(check))
            second.append(timed(check))
            ref.append(timed(status))
            shutil.rmtree(cache, ignore_errors=True)
            v1.append(verify_s(big, env))
            v2.append(verify_s(big, env))
            vs.append(verify_s(small, env))
        assert not check().changes, "the benchmark repository is not clean"
    n = args.files
    best = min
    rows = [
        (f"code check, {n} files, empty cache", f"{best(first) * 1000:.0f} ms",
         f"{best(ref) * 1000:.0f} ms git status", f"{best(first) / best(ref):.1f}x", "-", None),
        (f"code check, {n} files, second", f"{best(second) * 1000:.0f} ms",
         f"{best(ref) * 1000:.0f} ms git status", f"{best(second) / best(ref):.1f}x", "< 1 s",
         best(second) < 1.0),
        (f"verify, {n} files, empty cache", f"{best(v1):.2f} s",
         f"{best(vs):.2f} s one-file repo", f"+{best(v1) - best(vs):.2f} s", "-", None),
        (f"verify, {n} files, second", f"{best(v2):.2f} s",
         f"{best(vs):.2f} s one-file repo", f"+{best(v2) - best(vs):.2f} s", "< +1 s",
         best(v2) - best(vs) < 1.0),
    ]  # fmt: skip
    print(f"(stat cache racy window {statcache.RACY_NS / 1e9:g} s; best of {args.repeat})")
    return print_table(rows, f"{n} tracked files, private stat cache")


if __name__ == "__main__":
    raise SystemExit(main())
