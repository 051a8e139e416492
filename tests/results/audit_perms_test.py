"""Modes against ``security.max_modes``: judged and tightened, never through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ftmanifest.manifest.data import FileModes
from ftmanifest.results import audit_perms as perms
from ftmanifest.results.audit import audit
from tests.results.conftest import AuditRun

ROOT_USER = os.geteuid() == 0


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_masks() -> None:
    assert perms.file_mask("0640") == 0o640 and perms.folder_mask("0640") == 0o750
    assert perms.folder_mask("600") == 0o700 and perms.folder_mask("0644") == 0o755


def test_loose_files_and_folders_are_judged_and_tightened_never_loosened(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "sub").chmod(0o777)
    (logs / "a.log").write_text("x")
    (logs / "a.log").chmod(0o666)
    (logs / "b.log").write_text("x")
    (logs / "b.log").chmod(0o400)  # tighter than allowed: left alone
    logs.chmod(0o750)
    loose, _, _ = perms.judge([("logs", logs)], FileModes())
    assert {(p.path.name, p.mode) for p in loose} == {("sub", 0o777), ("a.log", 0o666)}
    row = perms.problem_finding(next(p for p in loose if p.path.name == "a.log"), "fix")
    assert row.loc == ("security", "max_modes", "logs") and row.rule == "audit.permissions"
    assert "group-writable" in row.message and "world-readable" in row.message
    loose, unfixed, changes = perms.judge([("logs", logs)], FileModes(), fix=True)
    assert not loose and not unfixed
    assert {(c.path.name, c.old, c.new) for c in changes} == {
        ("sub", 0o777, 0o750),
        ("a.log", 0o666, 0o640),
    }
    assert _mode(logs / "b.log") == 0o400
    assert perms.judge([("logs", logs)], FileModes()) == ([], [], [])


def test_symlink_to_a_file_outside_is_never_chmodded(audit_run: AuditRun, tmp_path: Path) -> None:
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("not the run's")
    outside.chmod(0o644)
    outside_dir = tmp_path / "outside-dir"
    outside_dir.mkdir()
    outside_dir.chmod(0o777)
    (audit_run.run / "logs" / "link.log").symlink_to(outside)
    (audit_run.run / "checkpoints" / "linked").symlink_to(outside_dir, target_is_directory=True)
    report = audit(audit_run.run, audit_run.manifest, signature=False, fix_perms=True)
    assert _mode(outside) == 0o644 and _mode(outside_dir) == 0o777
    assert report.perm_changes == []
    # judged where they point, never changed there: unfixed rows naming the link
    rows = {f.path: f for f in report.findings if f.rule.startswith("audit.permissions")}
    assert set(rows) == {str(outside), str(outside_dir)}
    assert all(f.rule == "audit.permissions-unfixed" for f in rows.values())
    assert str(audit_run.run / "logs" / "link.log") in (rows[str(outside)].hint or "")


def test_a_file_swapped_for_a_symlink_after_judging_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o666)
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o750)
    victim = logs / "a.log"
    victim.write_text("x")
    victim.chmod(0o666)
    [problem] = perms.check_tree(logs, "logs", "0640")
    victim.unlink()
    victim.symlink_to(outside)  # the race: a link in place of the judged file
    assert perms.tighten(problem) is None and _mode(outside) == 0o666
    loose, unfixed, changes = perms.judge([("logs", logs)], FileModes(), fix=True)
    assert (loose, changes) == ([], []) and _mode(outside) == 0o666
    assert [(p.path, p.via) for p in unfixed] == [(outside, victim)]  # judged, not changed


@pytest.mark.skipif(ROOT_USER, reason="root opens any file")
def test_an_unopenable_loose_file_is_an_unfixed_row(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o750)
    (logs / "w.log").write_text("x")
    (logs / "w.log").chmod(0o266)  # writable by all, unreadable by its owner
    _, [problem], _ = perms.judge([("logs", logs)], FileModes(), fix=True)
    assert perms.unfixed_finding(problem).rule == "audit.permissions-unfixed"
