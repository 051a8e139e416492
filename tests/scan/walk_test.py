"""What a scan cannot walk is a not-scanned error row, never silently nothing."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.errors import InputNotFoundError
from ftmanifest.scan.cache import scan_cached
from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.walk import walk
from tests.conftest import run_cli

EMAIL = "reach me at jane.doe@mailbox.org\n"


def _scan(folder: Path, cached: bool) -> Any:
    out: dict[str, Any] = {}

    def work() -> None:
        if cached:
            out["r"] = scan_cached([folder], ScanOptions(jobs=1))
        else:
            out["r"] = scan_paths([folder], ScanOptions(jobs=1))

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the scan blocked"
    return out["r"]


def _rows(result: Any) -> dict[str, str]:
    return {Path(f.path).name: f.message for f in result.findings if f.kind == "not-scanned"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "s.txt").write_text(EMAIL)
    (d / "a.txt").write_text("hello\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.txt").write_text(EMAIL)
    return d


@pytest.mark.parametrize("cached", [False, True])
def test_a_broken_symlink_is_a_row_not_an_abort(tree: Path, cached: bool) -> None:
    (tree / "dangling").symlink_to("nowhere")
    result = _scan(tree, cached)
    assert "broken symlink" in _rows(result)["dangling"]
    assert any(f.kind == "pii" for f in result.findings)  # the rest was scanned


@pytest.mark.parametrize("cached", [False, True])
def test_special_files_are_rows_and_never_opened(tree: Path, cached: bool) -> None:
    import socket

    os.mkfifo(tree / "part0.jsonl")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tree / "sock"))
        rows = _rows(_scan(tree, cached))
    assert "FIFO" in rows["part0.jsonl"] and "socket" in rows["sock"]
    assert all(
        f.severity == "error" for f in _scan(tree, cached).findings if f.kind == "not-scanned"
    )


def test_symlinks_inside_are_followed_and_outside_reported(tree: Path) -> None:
    (tree / "inside").symlink_to("sub")
    (tree / "out").symlink_to(tree.parent / "outside")
    (tree / "loop").symlink_to(".")
    result = _scan(tree, cached=False)
    found = sorted(Path(f.path).relative_to(tree).as_posix() for f in result.findings)
    assert "inside/s.txt" in found and "sub/s.txt" in found
    rows = _rows(result)
    assert (
        "outside the scanned folder" in rows["out"] and str(tree.parent / "outside") in rows["out"]
    )
    assert "loop" in rows["loop"]


def test_an_unreadable_folder_is_a_row(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tree / "locked"
    locked.mkdir()
    (locked / "x.txt").write_text(EMAIL)
    if os.geteuid() == 0:
        # root reads any folder: make scandir fail the way it does for a user
        real = os.scandir

        def scandir(path: Any) -> Any:
            if os.fspath(path) == str(locked):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)

        monkeypatch.setattr(os, "scandir", scandir)
    else:
        locked.chmod(0)
    try:
        files, problems = walk([tree])
    finally:
        locked.chmod(0o755)
    assert [p.path for p in problems] == [str(locked)]
    assert "unreadable folder" in problems[0].message and problems[0].severity == "error"
    assert tree / "sub" / "s.txt" in files


def test_a_missing_path_named_by_the_user_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError):
        walk([tmp_path / "typo"])
    result = run_cli("scan", str(tmp_path / "typo"))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_cli_exit_code_counts_walk_rows(tree: Path) -> None:
    (tree / "sub" / "s.txt").write_text("clean\n")
    assert run_cli("scan", str(tree)).returncode == 0
    (tree / "dangling").symlink_to("nowhere")
    result = run_cli("scan", str(tree))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "broken symlink" in result.stdout
