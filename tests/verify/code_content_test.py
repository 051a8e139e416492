"""The code pin compares content, not git's summary of it.

Each attack leaves ``git status`` clean while the training interpreter runs other
bytes than the pinned commit's: the test proves it by running ``train.py`` (the
real interpreter prints another marker than the committed file does), then
expects verify to refuse, naming the file with the pinned blob and the one
found.  Beside each, a control with the same git setting and the pinned bytes
passes: the setting alone is no refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.findings import Finding
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import GIT_ENV, write_project

COMMITTED = "print('MARK-committed')\n"
ATTACKER = "print('MARK-attacker!')\n"  # the same size: git's stat check cannot tell


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "GIT_OPTIONAL_LOCKS": "0"}
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def _runs(root: Path, source: str | None = None) -> str:
    """What the real interpreter prints: ``train.py`` in ``root``, or ``source`` there."""
    argv = [sys.executable, "train.py"] if source is None else [sys.executable, "-"]
    done = subprocess.run(
        argv, cwd=root, input=source, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def _proves(root: Path, rev: str = "HEAD", script: str = "train.py") -> None:
    """The attack is real: git reports nothing, yet the interpreter runs other code."""
    assert script not in _git(root, "status", "--porcelain"), "git sees the change"
    assert _runs(root) != _runs(root, _git(root, "show", f"{rev}:{script}"))


def _code_rows(manifest: Path) -> list[Finding]:
    report = verify_manifest(manifest, signature=False)
    return [f for f in report.findings if (f.field or "").startswith("environment.code")]


def _refused_for(manifest: Path, rel: str) -> Finding:
    rows = [f for f in _code_rows(manifest) if f.path == rel]
    assert rows, f"no code row names {rel}: {_code_rows(manifest)}"
    return rows[0]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed training repo with ``train.py``, its manifest locked (and committed)."""
    for k, v in {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "TOKENIZERS_PARALLELISM": "false"}.items():
        monkeypatch.setenv(k, v)
    manifest = write_project(tmp_path / "repo", {"train.py": COMMITTED})
    root = manifest.parent
    _git(root, "add", "exp.yaml")
    _git(root, "commit", "-qm", "lock")
    assert _code_rows(manifest) == []
    return root


# --- index flags -------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_a_change_hidden_by_an_index_flag_is_refused(repo: Path, flag: str) -> None:
    (repo / "train.py").write_text(ATTACKER)
    _git(repo, "update-index", flag, "train.py")
    _proves(repo)
    row = _refused_for(repo / "exp.yaml", "train.py")
    assert row.field == "environment.code.dirty"
    assert _git(repo, "rev-parse", "HEAD:train.py").strip() in (row.expected or "")
    assert _git(repo, "hash-object", "--no-filters", "train.py").strip() in (row.observed or "")
    assert f"--no-{flag[2:]} train.py" in (row.hint or "")


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_an_index_flag_on_an_unchanged_file_is_no_refusal(repo: Path, flag: str) -> None:
    _git(repo, "update-index", flag, "train.py")
    assert _code_rows(repo / "exp.yaml") == []


def test_a_file_deleted_under_skip_worktree_is_refused(repo: Path) -> None:
    _git(repo, "update-index", "--skip-worktree", "train.py")
    (repo / "train.py").unlink()
    assert "train.py" not in _git(repo, "status", "--porcelain")
    row = _refused_for(repo / "exp.yaml", "train.py")
    assert row.observed == "absent" and "--no-skip-worktree train.py" in (row.hint or "")


def test_a_file_staged_under_skip_worktree_is_refused(repo: Path) -> None:
    """A new file put into the index (not the commit) is not untracked for git."""
    (repo / "helper.py").write_text("x = 1\n")
    _git(repo, "add", "helper.py")
    _git(repo, "update-index", "--skip-worktree", "helper.py")
    assert "helper.py" in " ".join(f.observed or "" for f in _code_rows(repo / "exp.yaml"))


# --- clean filters -------------------------------------------------------------------


@pytest.mark.parametrize("where", ["info-attributes", "committed-gitattributes"])
def test_a_clean_filter_that_shows_git_the_pinned_bytes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    files = {"train.py": COMMITTED}
    if where == "committed-gitattributes":
        files[".gitattributes"] = "*.py filter=x\n"
    manifest = write_project(tmp_path / "repo", files)
    root = manifest.parent
    if where == "info-attributes":
        (root / ".git" / "info" / "attributes").write_text("*.py filter=x\n")
    _git(root, "config", "filter.x.clean", "sed s/attacker!/committed/")
    assert _code_rows(manifest) == []  # the control: a filter, the pinned bytes
    (root / "train.py").write_text(ATTACKER)
    _git(root, "add", "train.py")  # the index takes the filtered (pinned) blob
    _proves(root)
    row = _refused_for(manifest, "train.py")
    assert _git(root, "rev-parse", "HEAD:train.py").strip() in (row.expected or "")


# --- stat information put back ---------------------------------------------------------


@pytest.mark.parametrize("setting", ["core.trustctime=false", "core.checkStat=minimal"])
def test_a_same_size_edit_with_its_mtime_put_back_is_refused(repo: Path, setting: str) -> None:
    name, value = setting.split("=")
    _git(repo, "config", name, value)
    train = repo / "train.py"
    old = (1_600_000_000, 1_600_000_000)
    os.utime(train, old)
    _git(repo, "update-index", "--refresh")  # the index records the old mtime
    assert _code_rows(repo / "exp.yaml") == []  # the control: the setting, the pinned bytes
    train.write_text(ATTACKER)
    os.utime(train, old)
    _proves(repo)
    _refused_for(repo / "exp.yaml", "train.py")


# --- submodules ---------------------------------------------------------------------------


def _library(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with two commits of ``lib.py``: (folder, first, second)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _git(lib, "init", "-q")
    (lib / "lib.py").write_text("MARK = 'lib-v1'\n")
    _git(lib, "add", "lib.py")
    _git(lib, "commit", "-qm", "v1")
    first = _git(lib, "rev-parse", "HEAD").strip()
    (lib / "lib.py").write_text("MARK = 'lib-v2'\n")
    _git(lib, "commit", "-qam", "v2")
    return lib, first, _git(lib, "rev-parse", "HEAD").strip()


IGNORES = {
    "gitmodules": None,  # committed in .gitmodules before the lock
    "config": ("submodule.sub.ignore", "all"),
    "diff-config": ("diff.ignoreSubmodules", "all"),
}


@pytest.fixture(params=sorted(IGNORES))
def with_sub(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str, str]:
    """A repo whose ``train.py`` prints its submodule's marker, git told to ignore it."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    lib, first, second = _library(tmp_path)
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "sub")
    _git(root / "sub", "checkout", "-q", first)
    if IGNORES[request.param] is None:
        _git(root, "config", "-f", ".gitmodules", "submodule.sub.ignore", "all")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the library at v1")
    manifest = write_project(
        root, {"train.py": "import sys\nsys.path.insert(0, 'sub')\nimport lib\nprint(lib.MARK)\n"}
    )
    if IGNORES[request.param] is not None:
        _git(root, "config", *IGNORES[request.param])  # type: ignore[misc]
    assert _runs(root) == "lib-v1"
    assert _code_rows(manifest) == []  # the control: the submodule at its gitlink
    return manifest, first, second


def test_a_submodule_at_another_commit_is_refused(with_sub: tuple[Path, str, str]) -> None:
    manifest, first, second = with_sub
    root = manifest.parent
    _git(root / "sub", "checkout", "-q", second)
    assert "sub" not in _git(root, "status", "--porcelain")
    assert _runs(root) == "lib-v2"
    row = _refused_for(manifest, "sub")
    assert first in (row.expected or "") and second in (row.observed or "")
    assert f"git -C sub checkout {first}" in (row.hint or "")


def test_a_change_inside_a_submodule_is_refused(with_sub: tuple[Path, str, str]) -> None:
    manifest, _first, _second = with_sub
    root = manifest.parent
    (root / "sub" / "lib.py").write_text("MARK = 'lib-XX'\n")
    assert "sub" not in _git(root, "status", "--porcelain")
    assert _runs(root) == "lib-XX"
    _refused_for(manifest, "sub/lib.py")


def test_a_file_added_inside_a_submodule_is_refused(with_sub: tuple[Path, str, str]) -> None:
    manifest, _first, _second = with_sub
    root = manifest.parent
    (root / "sub" / "extra.py").write_text("x = 1\n")
    assert "sub/extra.py" in " ".join(f.observed or "" for f in _code_rows(manifest))


# --- two manifests in one repository --------------------------------------------------------


def _sign(manifest: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ftmanifest.manifest import load_manifest
    from ftmanifest.signing.sign import sign_manifest

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    sign_manifest(manifest, load_manifest(manifest).canonical(), key)


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Manifests A and B of one repository, both locked at one commit C0."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    a = write_project(tmp_path / "repo", {"train.py": COMMITTED, "config.yaml": "lr: 1\n"})
    root = a.parent
    _git(root, "checkout", "--", "exp.yaml")  # the draft back
    b = root / "exp_b.yaml"
    b.write_text(a.read_text().replace("id: docroute-lora-r16", "id: docroute-lora-r16-b"))
    _git(root, "add", "exp_b.yaml")
    _git(root, "commit", "-qm", "a second experiment")
    lock_manifest(a)
    lock_manifest(b)
    return a, b


def test_locking_two_manifests_at_one_commit_leaves_both_clean(two: tuple[Path, Path]) -> None:
    a, b = two
    assert "dirty: false" in b.read_text()
    assert _code_rows(a) == [] and _code_rows(b) == []


def test_committing_one_locked_manifest_leaves_the_other_clean(two: tuple[Path, Path]) -> None:
    a, b = two
    root = a.parent
    _sign(a)
    from ftmanifest.ledger.runrecord import append

    append(a, {"status": "planned"})
    _git(root, "add", "exp.yaml", "exp.yaml.sig.json", ".ftmanifest")
    _git(root, "commit", "-qm", "lock and sign A")
    assert _code_rows(b) == []
    assert _code_rows(a) == []
    # the control: a code change committed beside them still moves B's code
    (root / "train.py").write_text(ATTACKER)
    _git(root, "commit", "-qam", "new code")
    assert [f.field for f in _code_rows(b)] == ["environment.code.commit"]


def test_a_config_file_turned_into_a_manifest_is_still_code(two: tuple[Path, Path]) -> None:
    """Only a file that was a manifest in the pinned commit too may change as one."""
    a, b = two
    root = a.parent
    (root / "config.yaml").write_text("ftmanifest: 1\nlr: 100\n")
    _refused_for(b, "config.yaml")
    _git(root, "commit", "-qam", "a new config")
    rows = _code_rows(b)
    assert [f.field for f in rows] == ["environment.code.commit"]
    assert "config.yaml" in (rows[0].observed or "")


def test_a_script_named_like_an_envelope_is_still_code(two: tuple[Path, Path]) -> None:
    a, b = two
    root = a.parent
    (root / "train.py.sig.json").write_text('{"lr": 100}\n')
    assert "train.py.sig.json" in " ".join(f.observed or "" for f in _code_rows(b))


def test_a_tracked_script_among_the_ledger_records_is_still_read(repo: Path) -> None:
    """The manifest's data and weights are not read twice; the ledger folder is read."""
    from ftmanifest.ledger.runrecord import append, records_path

    append(repo / "exp.yaml", {"status": "planned"})
    hook = records_path(repo / "exp.yaml") / "sitecustomize.py"
    hook.write_text(COMMITTED)
    _git(repo, "add", ".ftmanifest")
    _git(repo, "commit", "-qm", "records, and a script among them")
    hook.write_text(ATTACKER)
    _git(repo, "update-index", "--skip-worktree", str(hook.relative_to(repo)))
    _refused_for(repo / "exp.yaml", str(hook.relative_to(repo)))
