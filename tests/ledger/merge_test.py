"""Two git branches that each add records merge without a conflict; the
merged ledger checks clean with two heads, and the next record joins them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ftmanifest.ledger import Ledger, open_ledger
from tests.conftest import GIT_ENV, git
from tests.ledger.conftest import check_json, fill


def _git_out(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV},
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def test_branches_merge_without_conflict_and_the_next_record_joins_them(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("project\n")
    store = open_ledger(repo / "exp.yaml")  # .ftmanifest/ledger at the work tree's root
    assert store.root == repo / ".ftmanifest" / "ledger"
    fill(store, 2, attempt="main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ledger on main")

    git(repo, "checkout", "-q", "-b", "a")
    a_records = fill(store, 2, attempt="a")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records on a")

    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "b")
    assert len(Ledger(store.root).read().entries) == 2  # a's records are not here
    b_records = fill(store, 3, attempt="b")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records on b")

    git(repo, "checkout", "-q", "a")
    git(repo, "merge", "--no-edit", "-q", "b")  # check=True: a conflict fails here
    assert _git_out(repo, "status", "--porcelain") == ""
    assert _git_out(repo, "diff", "--name-only", "--diff-filter=U") == ""

    contents = store.read()
    assert len(contents.entries) == 2 + 2 + 3
    heads = sorted(e.id for e in contents.heads())
    assert heads == sorted([a_records[-1].id, b_records[-1].id])
    code, report = check_json(store.root)
    assert (code, report["problems"], sorted(report["heads"])) == (0, [], heads)

    joined = store.append({"status": "planned", "attempt": "after-merge"})
    assert joined.prev == heads
    assert joined.seq == 1 + max(a_records[-1].seq, b_records[-1].seq) == 6
    after = store.read()
    assert [e.id for e in after.heads()] == [joined.id]
    code, report = check_json(store.root)
    assert (code, report["heads"]) == (0, [joined.id])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "joined")
    assert "joined" in _git_out(repo, "log", "--oneline", "-1")
