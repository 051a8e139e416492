"""``lock --distributed`` and ``scan --distributed`` under a real ``torchrun --nproc-per-node 2``.

Each job gets a fresh cache folder shared by its two ranks (two ranks of one
host share the default cache), so the ranks really read their shares; the
single-process run it is compared with has a cache of its own.  Three jobs,
a few seconds each (torch is imported once per rank).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import random
import shutil
from pathlib import Path

import pytest

from ftmanifest.cli import main
from tests.conftest import ENV, write_project
from tests.distributed.launch import VERIFY_SCRIPT, JobResult, torchrun

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
AWS = "AKIAIOSFODNN7EXAMPLE"


def job(folder: Path, argv: list[str], cache: Path) -> JobResult:
    env = {"FTM_ARGV": json.dumps(argv), "FTM_RANK_SPEC": "{}", "FTMANIFEST_CACHE_DIR": str(cache)}
    return torchrun(folder, VERIFY_SCRIPT, env=env, timeout=150)


@pytest.fixture
def shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A locked project whose training data is 9 shards, then changed: lock has work to do."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    rows = [f'{{"text": "doc {i}", "label": "billing"}}\n' for i in range(40)]
    files: dict[str, str | None] = {
        f"data/shards/{i}.jsonl": "".join(rows[: 4 + i]) for i in range(9)
    }
    files["data/train.jsonl"] = None
    manifest = write_project(tmp_path / "repo", files, train="data/shards")
    root = manifest.parent
    for i in (1, 4, 7):
        with (root / "data" / "shards" / f"{i}.jsonl").open("a") as f:
            f.write('{"text": "one more", "label": "billing"}\n')
    (root / "model" / "tokenizer.json").write_text('{"v": ' + "1" * 300_000 + "}\n")
    return manifest


# Rank 0 first runs a plain ``lock`` on a copy, in the job's own environment:
# torchrun sets variables lock pins (WORLD_SIZE, OMP_NUM_THREADS, TORCH_*).
PLAIN_FIRST = (
    """import os
if os.environ["RANK"] == "0":
    import contextlib, io
    from ftmanifest.cli import main as plain
    with contextlib.redirect_stderr(io.StringIO()):
        assert plain(["lock", os.environ["FTM_PLAIN"], "--no-cache"]) == 0
"""
    + VERIFY_SCRIPT
)


def test_lock_distributed_writes_what_lock_writes(shards: Path, tmp_path: Path) -> None:
    shutil.copytree(shards.parent, tmp_path / "plain", symlinks=True)
    plain = tmp_path / "plain" / shards.name
    before = shards.read_text()
    env = {
        "FTM_ARGV": json.dumps(["lock", str(shards), "--distributed"]),
        "FTM_RANK_SPEC": "{}",
        "FTMANIFEST_CACHE_DIR": str(tmp_path / "jobcache"),
        "FTM_PLAIN": str(plain),
    }
    result = torchrun(tmp_path / "job", PLAIN_FIRST, env=env, timeout=150)
    assert result.codes() == {0: 0, 1: 0}, result.log[-3000:]
    assert plain.read_text() != before and "tokenizer.json" in plain.read_text()
    assert shards.read_text() == plain.read_text()
    assert "rank 1 of 2: lock done" in result.ranks[1].err
    assert "locked" in result.ranks[0].err and "rank 1" not in result.ranks[0].err


def test_lock_distributed_writes_nothing_when_a_rank_fails(shards: Path, tmp_path: Path) -> None:
    """Rank 1 has no manifest: it still takes part, and every rank exits 2, nothing written."""
    shutil.copytree(shards.parent, tmp_path / "repo0", symlinks=True)
    mine = tmp_path / "repo0" / shards.name
    before = mine.read_text()
    argv = ["lock", str(tmp_path / "repo{rank}" / shards.name), "--distributed"]
    result = job(tmp_path / "job", [*argv, "--rank-timeout", "60"], tmp_path / "jobcache")
    assert result.codes() == {0: 2, 1: 2}, result.log[-3000:]
    assert result.elapsed < 60  # a refusal, not the deadline
    assert mine.read_text() == before
    assert "repo1" in result.ranks[1].err and "error" in result.ranks[1].err
    assert "rank 0 of 2: lock failed (exit 2) on rank 1 (" in result.ranks[0].err


def _dataset(root: Path) -> None:
    """Many files; secrets, personal data and an unsafe pickle planted in some."""
    rng = random.Random(18)
    for i in range(40):
        sub = root / f"part{i % 4}"
        sub.mkdir(parents=True, exist_ok=True)
        lines = [
            f'{{"id": {n}, "text": "record {n} of shard {i}"}}'
            for n in range(rng.randrange(5, 300))
        ]
        if i % 7 == 3:
            lines.insert(rng.randrange(len(lines)), json.dumps({"text": f"token {GHP}"}))
        if i % 9 == 5:
            lines.insert(
                rng.randrange(len(lines)),
                json.dumps({"text": f"key {AWS} mail a.b@corp.example.com"}),
            )
        if i % 11 == 2:
            lines.append(json.dumps({"text": "call +44 20 7946 0958 or jane.doe@example.org"}))
        (sub / f"shard-{i:02}.jsonl").write_text("\n".join(lines) + "\n")
    (root / "part0" / "big.txt").write_text(("filler line\n" * 400_000) + f"late {GHP}\n")
    (root / "part1" / "model.pkl").write_bytes(pickle.dumps({"w": os.system}, protocol=2))
    (root / "part2" / "empty.txt").write_bytes(b"")
    (root / "part3" / "blob.dat").write_bytes(bytes(range(256)) * 4)
    os.mkfifo(root / "part3" / "pipe")
    (root / "part3" / "dup.jsonl").symlink_to(root / "part0" / "shard-00.jsonl")


def test_scan_distributed_prints_exactly_what_scan_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _dataset(data)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["scan", str(data), "--format", "json"])
    single = out.getvalue()
    doc = json.loads(single)
    rules = {f["rule"] for f in doc["findings"]}
    assert code == 1 and {"secret.github-pat", "pickle.unsafe-import"} <= rules, rules
    assert GHP not in single and AWS not in single  # redacted
    result = job(
        tmp_path / "job",
        ["scan", str(data), "--format", "json", "--distributed"],
        tmp_path / "jobcache",
    )
    assert result.codes() == {0: 1, 1: 1}, result.log[-3000:]
    assert result.ranks[0].out == single
    assert result.ranks[1].out == ""
    assert "rank 1 of 2" in result.ranks[1].err and "job exit 1" in result.ranks[1].err
    cache = tmp_path / "jobcache" / "scancache-v2.sqlite3"
    assert cache.exists()  # the ranks stored their results in the cache they share


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["scan", "{data}", "--distributed"], {}, "none set WORLD_SIZE"),
        (["lock", "{data}/m.yaml", "--distributed"], {}, "none set WORLD_SIZE"),
        (["scan", "{data}", "--rank-timeout", "5"], {}, "--rank-timeout needs --distributed"),
        (["lock", "{data}/m.yaml", "--rank-timeout", "5"], {}, "needs --distributed"),
        (
            ["scan", "{data}", "--distributed", "--rank-timeout", "0"],
            {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "localhost", "MASTER_PORT": "1"},
            "--rank-timeout is out of range",
        ),
        (
            ["lock", "{data}/m.yaml", "--distributed"],
            {"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "localhost", "MASTER_PORT": "1"},
            "do not describe a job",
        ),
    ],
)
def test_bad_distributed_usage_is_exit_2_before_joining(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    says: str,
) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "m.yaml").write_text("ftmanifest: 1\n")
    assert main([a.replace("{data}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
