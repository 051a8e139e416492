"""Hostile files in the ledger folder, and a ledger folder that is not a folder.

A symlink, a FIFO, an oversized file, a stray file or a leftover temp file
among the records is one problem for ``ledger check`` (exit 1), never a
record, never a hang; ``ledger list`` still lists the real attempts.  A ledger
"folder" that is a symlink or a regular file is refused by every append
(``OSError``; ``ledger plan`` exit 2), and nothing is written through it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ftmanifest.ledger import Ledger
from ftmanifest.ledger.recordfile import MAX_RECORD_BYTES, file_name, record_id
from tests.conftest import CLF, within
from tests.ledger.conftest import fill, ftmanifest_cmd, rules

# a valid record under the name it hashes to: accepted if the reader followed or read it
FORGED = {"format": 1, "seq": 1, "prev": [], "at": "2026-01-01T00:00:00.000000+00:00",
          "status": "completed", "attempt": "forged"}  # fmt: skip
FORGED_NAME = file_name(FORGED, record_id(FORGED))


def _plant(folder: Path, kind: str, outside: Path) -> tuple[str, str]:
    """Put one hostile file in ``folder``; returns (its name, the rule expected)."""
    text = json.dumps({"record": FORGED, "signature": None})
    if kind == "symlink":
        outside.mkdir()
        (outside / FORGED_NAME).write_text(text)
        (folder / FORGED_NAME).symlink_to(outside / FORGED_NAME)
        return FORGED_NAME, "ledger.unreadable"
    if kind == "dangling-symlink":
        (folder / FORGED_NAME).symlink_to(outside / "nothing-here")
        return FORGED_NAME, "ledger.unreadable"
    if kind == "fifo":
        os.mkfifo(folder / FORGED_NAME)
        return FORGED_NAME, "ledger.unreadable"
    if kind == "folder":
        (folder / FORGED_NAME).mkdir()
        return FORGED_NAME, "ledger.unreadable"
    if kind == "oversized":
        big = dict(FORGED, pad="x" * (MAX_RECORD_BYTES + 1))
        name = file_name(big, record_id(big))
        (folder / name).write_text(json.dumps({"record": big, "signature": None}))
        return name, "ledger.unreadable"
    if kind == "stray":
        (folder / "notes.txt").write_text("not a record\n")
        return "notes.txt", "ledger.stray-file"
    if kind == "leftover":
        name = f".{FORGED_NAME}.k2j3h4.tmp"
        (folder / name).write_text(text[:20])  # torn
        return name, "ledger.leftover"
    raise AssertionError(kind)


KINDS = ["symlink", "dangling-symlink", "fifo", "folder", "oversized", "stray", "leftover"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a short timeout: a reader that blocks on a FIFO fails, not hangs."""
    env = {**os.environ, "COLUMNS": "1000"}
    return subprocess.run(
        ftmanifest_cmd(*args), capture_output=True, text=True, timeout=30, env=env
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_file_is_one_problem_and_list_still_works(
    folder: Path, tmp_path: Path, kind: str
) -> None:
    store = Ledger(folder)
    fill(store, 2)
    name, rule = _plant(folder, kind, tmp_path / "outside")
    contents, problems = within(20, store.check)
    assert [(p.rule, Path(p.file).name) for p in problems] == [(rule, name)]
    assert [e.record["attempt"] for e in contents.entries] == ["a0", "a1"]

    check = _cli("ledger", "check", "--ledger", str(folder), "--format", "json")
    assert check.returncode == 1, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert rules(report) == [rule] and report["records"] == 2
    text = _cli("ledger", "check", "--ledger", str(folder))
    assert text.returncode == 1 and rule in text.stdout

    listed = _cli("ledger", "list", "--ledger", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    data = json.loads(listed.stdout)
    assert [a["attempt"] for a in data["attempts"]] == ["a0", "a1"]
    assert [p["rule"] for p in data["problems"]] == [rule]
    text = _cli("ledger", "list", "--ledger", str(folder))
    assert text.returncode == 0 and "2 attempt(s)" in text.stdout
    assert f"warning: {rule}" in text.stdout

    # appending goes on (the hostile file is not a head) and never writes through it
    store.append({"status": "planned", "attempt": "a2"})
    assert [e.record["attempt"] for e in store.read().entries] == ["a0", "a1", "a2"]
    assert len(store.read().heads()) == 1
    if kind == "symlink":
        outside = tmp_path / "outside"
        assert os.listdir(outside) == [FORGED_NAME]


@pytest.mark.parametrize("kind", ["symlink", "file", "dangling-symlink"])
def test_a_ledger_folder_that_is_not_a_folder_is_refused(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "ledger"
    if kind == "symlink":
        link.symlink_to(target, target_is_directory=True)
    elif kind == "dangling-symlink":
        link.symlink_to(tmp_path / "missing")
    else:
        link.write_text("a file\n")
    before = link.read_text() if kind == "file" else None

    with pytest.raises(OSError):
        Ledger(link).append({"status": "planned", "attempt": "x"})
    out = _cli("ledger", "plan", str(CLF), "--ledger", str(link))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot write to the ledger" in out.stderr and str(link) in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr

    assert os.listdir(target) == []  # nothing written through the link
    assert not (tmp_path / "missing").exists()
    if kind == "file":
        assert link.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "ledger"]


def test_list_survives_a_well_formed_record_with_hostile_values(folder: Path) -> None:
    """Valid name and links, nonsense inside (a budget limit that is a string):
    ``ledger list`` still lists, it does not crash comparing int and str."""
    store = Ledger(folder)
    store.append({
        "attempt": "aaaa1111", "status": "completed", "budget_used": {"steps": 5},
        "manifest": {"body": {"experiment": {"budget": {"max_steps": "x"}}}},
    })  # fmt: skip
    for fmt in ("text", "json"):
        out = _cli("ledger", "list", "--ledger", str(folder), "--format", fmt)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "aaaa1111" in out.stdout


def test_show_survives_a_well_formed_record_with_hostile_values(folder: Path) -> None:
    Ledger(folder).append({"attempt": "bbbb2222", "status": ["x"], "accepted": 5})
    out = _cli("ledger", "show", "bbbb2222", "--ledger", str(folder))
    assert out.returncode == 0, out.stdout + out.stderr
