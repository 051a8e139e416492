"""What ``ftmanifest.guard`` adds to a training script's start, on the tiny example.

  .venv/bin/python benchmarks/bench_guard.py [--repeat 3]

Builds the tiny example in a git repository, locks it and commits the lock, then
times whole processes (best of ``--repeat``), with a private stat cache:

- the reference: ``python -c 'import torch, transformers'``;
- ``verify`` in the script: the same imports, then ``ftmanifest.verify_manifest(M)``
  (what a script could run before the guard judged its own interpreter);
- the guard: the same imports, then ``ftmanifest.guard(M)``: verify, and the judgement
  of every module torch and transformers imported (RECORD sha256s, the bytecode
  run, the .pth files...).  First with an empty stat cache (every imported file
  hashed and every pyc the loader used compiled once to compare), then again
  (target: the second start adds under 1 s to the reference).

An untimed run first writes the bytecode Python would find on any installed
machine (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs).
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

GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.org",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
IMPORTS = "import torch, transformers"
VERIFY = IMPORTS + ", ftmanifest; assert ftmanifest.verify_manifest({m!r}, signature=False).ok"
GUARD = IMPORTS + ", ftmanifest; ftmanifest.guard({m!r}, signature=False)"
# the judgement alone, timed inside the process (verify before it, untimed)
JUDGE = (
    IMPORTS + ", time, ftmanifest; from ftmanifest.verify import guard"
    "; r = ftmanifest.verify_manifest({m!r}, signature=False); t = time.perf_counter()"
    "; v = guard.judge_this_interpreter(r); print(time.perf_counter() - t, len(v.rows))"
)


def git(root: Path, *args: str) -> None:
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_example(root: Path, env: dict[str, str]) -> Path:
    """The tiny example, committed, locked (its commit pinned), the lock committed."""
    from ftmanifest.examples.project import build_example

    manifest = build_example(root)
    (root / ".gitignore").write_text("out/\n__pycache__/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "example")
    argv = [sys.executable, "-m", "ftmanifest", "lock", str(manifest)]
    lock = subprocess.run(argv, env=env, capture_output=True, text=True)
    if lock.returncode != 0:
        sys.exit(f"lock failed:\n{lock.stdout}\n{lock.stderr}")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "lock")
    return manifest


def run_s(code: str, cwd: Path, env: dict[str, str]) -> float:
    return run(code, cwd, env)[0]


def run(code: str, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stdout) of ``python -c code``; exits on failure."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True)  # fmt: skip
    took = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"failed: {code}\n{done.stdout}\n{done.stderr[-3000:]}")
    return took, done.stdout


def judge_s(manifest: Path, cwd: Path, env: dict[str, str]) -> float:
    seconds, rows = run(JUDGE.format(m=str(manifest)), cwd, env)[1].split()
    assert rows == "0", "the benchmark's interpreter is refused"
    return float(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ftm-bench-guard-") as tmp:
        cache = Path(tmp) / "cache"
        env = installed_env({**os.environ, **GIT_ENV, "FTMANIFEST_CACHE_DIR": str(cache)})
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        root = Path(tmp) / "example"
        manifest = make_example(root, env)
        run_s(GUARD.format(m=str(manifest)), root, env)  # writes the bytecode, untimed
        time.sleep(2.1)  # past the stat cache's racy window for the files just written
        ref, verify, first, second, judge = [], [], [], [], []
        for _ in range(args.repeat):
            ref.append(run_s(IMPORTS, root, env))
            verify.append(run_s(VERIFY.format(m=str(manifest)), root, env))
            shutil.rmtree(cache, ignore_errors=True)
            first.append(run_s(GUARD.format(m=str(manifest)), root, env))
            second.append(run_s(GUARD.format(m=str(manifest)), root, env))
            judge.append(judge_s(manifest, root, env))
    r = min(ref)
    rows = [
        ("verify in the script, second", f"{min(verify):.2f} s", f"{r:.2f} s imports only",
         f"+{min(verify) - r:.2f} s", "-", None),
        ("guard, empty stat cache", f"{min(first):.2f} s", f"{r:.2f} s imports only",
         f"+{min(first) - r:.2f} s", "-", None),
        ("guard, second start", f"{min(second):.2f} s", f"{r:.2f} s imports only",
         f"+{min(second) - r:.2f} s", "< +1 s", min(second) - r < 1.0),
        ("of which the interpreter judgement", f"{min(judge):.2f} s", "-", "-", "-", None),
    ]  # fmt: skip
    return print_table(rows, f"tiny example, torch + transformers, best of {args.repeat}")


if __name__ == "__main__":
    raise SystemExit(main())
