"""Each file ``verify`` reads is opened once, and what it judges is what it hashed.

``verify --no-cache`` hashes every pinned file, then the scanner sniffs,
reads and judges the same files (text in forked workers for a big shard,
JSON and Parquet counted after the hash, a torch zip walked as a pickle),
and the LoRA check reads the base's safetensors headers.  Every open the
process makes is counted by an audit hook: ``open()`` and ``os.open`` both
raise the ``open`` event, and forked workers inherit the hook.  The hook
runs in a child process, so it does not outlive the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ftmanifest import held
from ftmanifest.examples.project import build_example
from ftmanifest.hashing.files import hash_files
from ftmanifest.scan.engine import POOL_MIN
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import git

COUNTER = """\
import os, sys
root, log = os.path.realpath(sys.argv[1]), os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND)
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(root + os.sep) and not os.path.isdir(path):
            os.write(log, (os.path.relpath(path, root) + "\\n").encode())
sys.addaudithook(hook)
from ftmanifest.cli import main
sys.exit(main(sys.argv[3:]))
"""

LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"
EXTRA_DATA = """\
  - name: extra
    role: train
    path: extra
    license: synthetic
    contains_personal_data: false
  - name: labels
    role: train
    path: labels.json
    format: json
    license: synthetic
    contains_personal_data: false
"""


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny example as a LoRA run, with more kinds of file than it ships, locked once."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    root = tmp_path_factory.mktemp("once")
    manifest = build_example(root / "ex")
    folder = manifest.parent
    text = manifest.read_text("utf-8").replace("method:\n  kind: full\n", LORA)
    manifest.write_text(text.replace("\nmethod:", EXTRA_DATA + "\nmethod:", 1))
    (folder / "extra").mkdir()
    line = json.dumps({"text": "routine shipping note " * 8}) + "\n"
    (folder / "extra" / "big.jsonl").write_text(line * (POOL_MIN // len(line) + 1))
    pq.write_table(pa.table({"text": ["a note", "another"]}), folder / "extra" / "rows.parquet")
    (folder / "labels.json").write_text(json.dumps([{"label": "billing"}, {"label": "legal"}]))
    torch.save({"w": torch.zeros(2)}, folder / "model" / "extra_state.bin")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "training code")
    lock_manifest(manifest)
    return manifest


@pytest.fixture
def example(locked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copytree(locked.parent, tmp_path / "ex")
    return tmp_path / "ex" / locked.name


def _opens(manifest: Path, tmp_path: Path, *args: str) -> tuple[int, Counter[str]]:
    script, log = tmp_path / "count.py", tmp_path / "opens.log"
    script.write_text(COUNTER)
    log.write_bytes(b"")
    run = subprocess.run(
        [sys.executable, str(script), str(manifest.parent), str(log), *args],
        cwd=manifest.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode in (0, 1), run.stderr
    opened = Counter(log.read_text().splitlines())
    return run.returncode, Counter({p: n for p, n in opened.items() if ".git" not in p})


def test_verify_no_cache_opens_every_file_once(example: Path, tmp_path: Path) -> None:
    rc, opened = _opens(example, tmp_path, "verify", example.name, "--no-cache", "--no-signature")
    assert rc == 0
    read = {"model/model.safetensors", "model/config.json", "model/extra_state.bin",
            "extra/big.jsonl", "extra/rows.parquet", "labels.json", "data/train.jsonl",
            "requirements.lock", example.name}  # fmt: skip
    assert read <= set(opened), opened
    assert {p: n for p, n in opened.items() if n != 1} == {}


def test_the_counter_sees_a_second_open(example: Path, tmp_path: Path) -> None:
    """The same harness counts two opens where two readers do not share one (``scan``)."""
    _, opened = _opens(example, tmp_path, "scan", "data", "model")
    assert opened["model/model.safetensors"] >= 2  # the format sniff, then the header check


def test_a_file_replaced_while_verify_reads_it_is_refused(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped after it was hashed (same bytes, another file): never OK."""
    from ftmanifest.verify import pipeline

    real = pipeline.scan_for_verify
    train = example.parent / "data" / "train.jsonl"

    def swap_then_scan(*args: object, **kwargs: object) -> object:
        shutil.copyfile(train, train.with_suffix(".new"))
        os.replace(train.with_suffix(".new"), train)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "scan_for_verify", swap_then_scan)
    report = verify_manifest(example, signature=False, use_cache=False)
    assert not report.ok
    (row,) = [f for f in report.findings if f.rule == "drift.moved"]
    assert (row.field, row.path) == ("data[0].path", "data/train.jsonl")
    assert row.observed == "the path names another file than the one hashed"


def test_a_file_written_while_verify_reads_it_is_refused(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.verify import pipeline

    real = pipeline.scan_for_verify
    weights = example.parent / "model" / "model.safetensors"

    def append_then_scan(*args: object, **kwargs: object) -> object:
        with weights.open("ab") as fh:
            fh.write(b"\0")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "scan_for_verify", append_then_scan)
    report = verify_manifest(example, signature=False, use_cache=False)
    moved = [f for f in report.findings if f.rule == "drift.moved"]
    assert [(f.field, f.observed) for f in moved] == [
        ("model.path", "the file was written to after it was hashed")
    ]


def test_the_scan_reads_the_hashed_file_not_what_the_path_names_later(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"hashed bytes\n")
    second.write_bytes(b"planted bytes\n")
    with held.holding() as kept:
        hash_files([first], use_cache=False)
        os.replace(second, first)
        with held.open_binary(first) as fh:
            assert fh.read() == b"hashed bytes\n"
        assert [how for _, how in kept.moved()] == [
            "the path names another file than the one hashed"
        ]
    with held.open_binary(first) as fh:  # outside an observation: the path, as it is now
        assert fh.read() == b"planted bytes\n"


def test_readers_of_one_descriptor_keep_their_own_offsets(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        a, b = held.reader(fd), held.reader(fd)
        assert a.read(3) == b"012"
        assert b.read(2) == b"01"
        assert a.read(2) == b"34"
        b.seek(-2, os.SEEK_END)
        assert b.read() == b"89"
        a.close()
        b.close()
        assert os.fstat(fd).st_size == 10  # closing a reader leaves the descriptor open
    finally:
        os.close(fd)


def test_at_most_the_limit_is_kept_and_nothing_outlives_the_block(tmp_path: Path) -> None:
    files = [tmp_path / f"{i}.txt" for i in range(3)]
    for p in files:
        p.write_text("x")
    with held.holding(limit=2) as kept:
        hash_files(files, use_cache=False)
        with held.holding() as inner:
            assert inner is kept  # a nested observation shares the outer one
        fds = kept.descriptors()
        assert len(fds) == 2
    assert held.current() is None
    for fd in fds.values():
        with pytest.raises(OSError):
            os.fstat(fd)
