"""Shared test helpers: example manifests, mutated copies, running the CLI."""

from __future__ import annotations

import locale
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support import cli_fork

# Correctness, not speed: a loaded 2-core CI machine must not fail a property
# test on Hypothesis' 200 ms default deadline.
settings.register_profile("ftmanifest", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ftmanifest")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "manifests").glob("*.yaml"))
# A git identity and no user/system config, for the real git repos tests build.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
CLF = ROOT / "manifests" / "docroute-lora-r16.yaml"
EXTRACT = ROOT / "manifests" / "invoice-extract-lora-r8.yaml"


# What transformers' enable_full_determinism sets besides torch's mode.
_DETERMINISM_VARIABLES = ("CUBLAS_WORKSPACE_CONFIG", "FLASH_ATTENTION_DETERMINISTIC")


def _determinism_restored() -> Any:
    """Run the body, then give back torch's deterministic mode and the variables
    full determinism sets, as they were (torch's default, off, when torch was not yet
    imported)."""
    torch = sys.modules.get("torch")
    mode = torch.are_deterministic_algorithms_enabled() if torch is not None else False
    variables = {name: os.environ.get(name) for name in _DETERMINISM_VARIABLES}
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.use_deterministic_algorithms(mode)
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# A Trainer with full_determinism (the example manifest's) switches torch's
# deterministic mode on for the whole process.  Each test gets back the state it
# found; each module too, since a module-scoped fixture that trains runs before any
# test's own fixture and would otherwise hand the mode to the next module's tests.
_torch_determinism_restored = pytest.fixture(autouse=True)(_determinism_restored)
_module_determinism_restored = pytest.fixture(autouse=True, scope="module")(_determinism_restored)


# The stat cache's racy window in this test process.  The tool's 2 s covers FAT's
# 2-second timestamps; the file systems tests write to stamp files to the kernel's
# clock tick (at most 10 ms), so 0.2 s is still twenty ticks.  Without this, every
# `lock` of freshly written files sleeps 2 s to settle them (about a fifth of the
# suite's time).  CLI subprocesses keep the tool's own window.
TEST_RACY_NS = 200_000_000


_TEST_CACHE = [""]  # this process's cache folder, removed when the session ends


def pytest_configure(config: pytest.Config) -> None:
    """Keep every test (and the CLI subprocesses it starts) out of the user's caches."""
    import tempfile

    from ftmanifest import statcache

    os.environ["FTMANIFEST_CACHE_DIR"] = _TEST_CACHE[0] = tempfile.mkdtemp(prefix="ftm-test-cache-")
    statcache.RACY_NS = TEST_RACY_NS
    # in this process, a fresh file is always worth settling: the tests of settle run here
    statcache.SETTLE_MIN_BYTES = statcache.SETTLE_MIN_FILES = 0
    # Collection imports torch, transformers and every test module and rewrites their
    # asserts: with the default thresholds it took 19 to 22 CPU s in each worker, 14 to 15
    # with young collections this rare from the start.  The heap is frozen once collected.
    import gc

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove this process's cache folder: each worker made one, 7 MiB or so, that was left
    in the temporary folder after every run."""
    import shutil

    if _TEST_CACHE[0]:
        shutil.rmtree(_TEST_CACHE[0], ignore_errors=True)


# Modules whose tests take minutes in one piece: the tutorial test runs the whole demo
# unless `make demo` left a stamped log (6 min on a quiet machine), accelerate's two
# 2-rank launches share a module fixture (187 s at loadavg 11), the README's path is
# one test (137 s at loadavg 12).  They run first: `pytest -n` hands tests out in
# collection order, and one of them collected last leaves a worker idle while it runs;
# first, each module also lands whole on one worker (its module fixture runs once).
RUN_FIRST = (
    "tests/tutorial_console_test.py::",
    "tests/distributed/accelerate_test.py::",
    "tests/readme_console_test.py::",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:  # longest first; the rest keep their order
        return next((i for i, p in enumerate(RUN_FIRST) if item.nodeid.startswith(p)), 99)

    items.sort(key=rank)


# A worker holds torch, transformers and every test module once collected: about a million
# objects that every full collection of the cyclic GC walked again, and the Trainer's
# teardown asks for one each run.  Measured on tests/integrations and tests/scan with
# `-n 2`: a third of one worker's CPU went to the GC (58 of 145 s); frozen after
# collection, with young collections ten times rarer, the pair ran in 153 s, not 202 s.
GC_YOUNG_THRESHOLD = 50_000


_full_collections = [0]  # full collections since the heap was last frozen


def _count_full(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info["generation"] == 2:
        _full_collections[0] += 1


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep what collection imported out of every later collection (``gc.freeze``)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.callbacks.append(_count_full)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After a test that ran a full collection (a Trainer asks for one), freeze what its
    fixtures left: what transformers imported lazily, which the next one walked again."""
    import gc

    try:
        return (yield)
    finally:
        if _full_collections[0]:
            gc.collect()
            gc.freeze()
            _full_collections[0] = 0


TOOL_RACY_NS = 2_000_000_000  # the window of a CLI subprocess (statcache.RACY_NS)


def settle(*paths: Path, window_ns: int | None = None) -> None:
    """Sleep until no file in ``paths`` is racy for the stat cache any more.

    Changed (mtime *or* ctime) within the racy window of hashing, a file is
    not cached; ctime cannot be put back, so a test that needs cache hits
    waits.  ``window_ns``: this process's window by default; ``TOOL_RACY_NS``
    when the files are hashed by a CLI subprocess.
    """
    import time

    from ftmanifest import statcache

    window = statcache.RACY_NS if window_ns is None else window_ns
    changed = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in paths)
    wait = changed + window + 5_000_000 - time.time_ns()
    if wait > 0:
        time.sleep(wait / 1e9)


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread; fail (instead of hanging the suite) if it blocks.

    For checks that must never open a FIFO or wait on a device: a regression
    fails after ``seconds`` rather than stopping CI.
    """
    import threading

    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised below, in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.fixture
def mutate(tmp_path: Path) -> Callable[..., Path]:
    """Copy an example manifest with text replacements; each must apply once."""

    def make(
        old: str, new: str, *more: tuple[str, str], source: Path = CLF, name: str = "m.yaml"
    ) -> Path:
        text = source.read_text("utf-8")
        for a, b in ((old, new), *more):
            assert text.count(a) >= 1, f"{a!r} not in {source.name}"
            text = text.replace(a, b, 1)
        out = tmp_path / name
        out.write_text(text, "utf-8")
        return out

    return make


def run_cli_fresh(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a fresh interpreter: for a test about what
    happens at the interpreter's start (``run_cli`` forks from one already started)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FTMANIFEST_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ftmanifest", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment ``run_cli`` gives its interpreter."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FTMANIFEST_DEBUG", None)
    return full_env


def run_cli_forked(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``run_cli``, in a process forked from a server that has imported the CLI
    already (``tests.support.cli_fork``): the same result without paying start-up
    and imports.  An environment the fork cannot honour runs ``run_cli`` itself."""
    full_env = _cli_env(env)
    server = cli_fork.server(_cli_env, str(ROOT))
    if server.unsound(full_env):
        return run_cli_fresh(*args, cwd=cwd, env=env)
    argv = [sys.executable, "-m", "ftmanifest", *args]
    code, out, err, timed_out = server.call(list(args), full_env, str(cwd or os.getcwd()), 120)
    stdout, stderr = _text(out), _text(err)
    if timed_out:
        raise subprocess.TimeoutExpired(argv, 120, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(argv, code, stdout, stderr)


# The CLI as the tests run it: a real, separate process for each call, forked from a
# server that has paid the interpreter's start and the imports once (about 0.4 to
# 0.7 CPU s a call otherwise); an environment a fork cannot honour starts afresh.
run_cli = run_cli_forked


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them (universal newlines)."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.fixture(scope="session", autouse=True)
def _cli_fork_server_ended() -> Any:
    """The fork server ``run_cli_forked`` starts on first use ends with the session."""
    yield
    cli_fork.shutdown()


# --- projects to verify -------------------------------------------------------

ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "TOKENIZERS_PARALLELISM": "false"}


def git(cwd: Path, *args: str) -> None:
    """Run git in ``cwd`` with the test identity; fail on error."""
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True
    )


def _tiny_llama_weights() -> str:
    """A real safetensors file with one Llama layer's projections (8x8 int8 zeros, all
    ASCII, so it fits the text files here): the modules the example's LoRA targets."""
    import json

    names = [f"model.layers.0.self_attn.{m}_proj.weight" for m in "qkvo"]
    names += [f"model.layers.0.mlp.{m}_proj.weight" for m in ("gate", "up", "down")]
    header = {n: {"dtype": "I8", "shape": [8, 8], "data_offsets": [64 * i, 64 * (i + 1)]}
              for i, n in enumerate(names)}  # fmt: skip
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 256)  # a length whose bytes are all ASCII (here: < 0x80)
    return len(text).to_bytes(8, "little").decode("latin-1") + text + "\0" * (64 * len(names))


PROJECT_FILES = {
    "model/config.json": '{"model_type": "llama"}\n',
    "model/model.safetensors": _tiny_llama_weights(),
    "data/train.jsonl": "".join(f'{{"text": "doc {i}", "label": "billing"}}\n' for i in range(5)),
    "data/eval.jsonl": '{"text": "e", "label": "returns"}\n',
    "data/test.jsonl": '{"text": "t", "label": "account"}\n',
    "requirements.lock": "torch==2.13.0\n",
    "scripts/clean_tickets.py": "print('clean')\n",
    "scripts/chat_template.py": "print('template')\n",
    "eval/zero.jsonl": "{}\n",
    "eval/cfg.yaml": "k: 1\n",
    ".gitignore": "out/\n",
}


def write_project(
    root: Path, files: dict[str, str | None] | None = None, *, train: str = "data/train.jsonl"
) -> Path:
    """A committed training repo with a locked manifest (the docroute example, made local).

    ``files`` replace, add to or (with None) drop from ``PROJECT_FILES``;
    ``train`` is the training data's path (a file or a folder of shards).
    """
    from ftmanifest.verify.lock import lock_manifest

    for rel, text in {**PROJECT_FILES, **(files or {})}.items():
        if text is None:
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    text = CLF.read_text()
    text = text.replace("  repo: Qwen/Qwen2.5-0.5B-Instruct\n", "  path: model\n")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("  revision: "))
    text = (
        text.replace("data/docroute/train.jsonl", train)
        .replace("data/docroute/", "data/")
        .replace("eval/baseline/zero-shot-results.jsonl", "eval/zero.jsonl")
        .replace("eval/docroute-eval-v3.yaml", "eval/cfg.yaml")
        .replace("  trainable_params: 8798208\n", "")  # the 0.5B model's count, not this one's
    ) + "\n"
    (root / "exp.yaml").write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "training code")
    lock_manifest(root / "exp.yaml")
    return root / "exp.yaml"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A training repo: model folder, data, scripts, baseline, and a locked manifest for them."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    return write_project(tmp_path / "repo")


HUB_MANIFEST = """\
ftmanifest: 1
experiment: {id: hub-exp}
model:
  repo: org/tiny
  revision: main   # lock pins the commit
data:
  - {name: train, role: train, path: train.jsonl, license: test}
"""


def hub_project(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    snapshots: dict[str, dict[str, bytes]],
    main: str,
    manifest: str = HUB_MANIFEST,
) -> tuple[Path, dict[str, str]]:
    """A hub cache holding ``snapshots`` of org/tiny (name -> file -> bytes, refs/main ->
    ``main``), the environment pointing at it, and ``manifest`` beside a train.jsonl."""
    from tests.support.hubcache import build_hub_cache

    folders = {}
    for name, files in snapshots.items():
        folder = tmp_path / "snapshots-src" / name
        folder.mkdir(parents=True)
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
        folders[name] = folder
    cache = tmp_path / "hf-cache"
    commits = build_hub_cache(cache, "org/tiny", folders, {"main": main})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "ftm-cache"))
    work = tmp_path / "project"
    work.mkdir()
    (work / "train.jsonl").write_text('{"text": "a"}\n')
    (work / "exp.yaml").write_text(manifest)
    return work / "exp.yaml", commits


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A hub cache with two snapshots of org/tiny (main -> v2) and a manifest on it."""
    config = b'{"model_type": "llama"}'
    return hub_project(
        tmp_path,
        monkeypatch,
        {
            "v1": {"config.json": config, "model.safetensors": b"weights one" * 100},
            "v2": {"config.json": config, "model.safetensors": b"weights two" * 100},
        },
        main="v2",
    )
