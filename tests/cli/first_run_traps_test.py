"""The traps of a first run, each one a
test that failed before its fix: the trust file is not training code, dirty
files are named, the code that trains is pinned, a hub cache whose
``refs/main`` moved is warned about, reproduce's requirements stay out of the
work tree and install from the index, ``audit --fix-perms`` leaves a shared
cache alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ftmanifest.verify import verify_manifest
from tests.conftest import ENV, git, run_cli

TRUST_LINE = (
    'alice@example.org namespaces="ftmanifest" ssh-ed25519 '
    "AAAAC3NzaC1lZDI1NTE5AAAAIH+hKAVitT0ejqaFQz9nXF9DCVQvAfVXs6vAXuHpx5xi\n"
)


def _fields(path: Path) -> dict[str, str | None]:
    report = verify_manifest(path, signature=False, scan=False)
    return {f.field or "": f.observed for f in report.findings}


def _add_trust_file(root: Path) -> Path:
    trust = root / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir(exist_ok=True)
    trust.write_text(TRUST_LINE)
    return trust


# --- the trust file and the ledger are not training code -----------------------


def test_trust_file_added_after_lock_leaves_the_code_clean(project: Path) -> None:
    _add_trust_file(project.parent)
    assert _fields(project) == {}


def test_trust_file_committed_after_lock_is_not_a_code_change(project: Path) -> None:
    root = project.parent
    _add_trust_file(root)
    git(root, "add", ".ftmanifest/allowed_signers")
    git(root, "commit", "-qm", "trust alice")
    assert _fields(project) == {}


def test_a_script_beside_the_trust_file_is_still_code(project: Path) -> None:
    root = project.parent
    _add_trust_file(root)
    (root / ".ftmanifest" / "train_hook.py").write_text("print('hidden')\n")
    fields = _fields(project)
    assert "environment.code.dirty" in fields
    assert ".ftmanifest/train_hook.py" in (fields["environment.code.dirty"] or "")
    assert "allowed_signers" not in (fields["environment.code.dirty"] or "")


# --- a dirty tree names its files ----------------------------------------------


def test_dirty_names_the_changed_files_in_text_and_json(project: Path) -> None:
    root = project.parent
    (root / "train.py").write_text("print('new')\n")
    (root / ".gitignore").write_text("out/\ncache/\n")  # a tracked file, not pinned
    rows = verify_manifest(project, signature=False, scan=False).findings
    observed = " ".join(
        f"{f.path} {f.observed}" for f in rows if f.field == "environment.code.dirty"
    )
    assert "train.py" in observed and ".gitignore" in observed
    assert [f.path for f in rows if f.field == "environment.code.dirty"] == [".gitignore", None]
    text = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert text.returncode == 1
    assert "train.py" in text.stdout and ".gitignore" in text.stdout
    doc = json.loads(
        run_cli("verify", str(project), "--no-signature", "--format", "json", env=ENV).stdout
    )
    rows = [f for f in doc["findings"] if f["field"] == "environment.code.dirty"]
    assert rows and rows[0]["path"] == ".gitignore" and "blob " in rows[0]["expected"]


def test_many_dirty_files_are_counted_not_all_listed(project: Path) -> None:
    root = project.parent
    for i in range(30):
        (root / f"gen_{i:02d}.py").write_text("x = 1\n")
    observed = _fields(project)["environment.code.dirty"] or ""
    assert "gen_00.py" in observed and "more" in observed and len(observed) < 400


# --- the code that trains is pinned ---------------------------------------------


def test_lint_flags_a_manifest_locked_outside_a_git_repository(
    hub: tuple[Path, dict[str, str]],
) -> None:
    manifest, _ = hub
    assert run_cli("lock", str(manifest)).returncode == 0
    assert "code:" not in manifest.read_text()  # nothing to pin: not in a repository
    result = run_cli("lint", str(manifest))
    assert result.returncode == 1
    assert "FTM012" in result.stdout and "environment.code.commit" in result.stdout
    assert "git" in result.stdout


def test_run_refuses_a_script_outside_the_pinned_repository(project: Path) -> None:
    outside = project.parent.parent / "train_elsewhere.py"
    marker = project.parent.parent / "ran"
    outside.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    result = run_cli(
        "run", str(project), "--no-signature", "--", sys.executable, str(outside), env=ENV
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert not marker.exists()
    err = result.stderr
    assert str(outside) in err and str(project.parent) in err
    assert "environment.code" in err and "move" in err and "Traceback" not in err


def test_run_starts_a_script_inside_the_pinned_repository(project: Path) -> None:
    result = run_cli(
        "run",
        str(project),
        "--no-signature",
        "--",
        sys.executable,
        "scripts/clean_tickets.py",
        cwd=project.parent,
        env=ENV,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean" in result.stdout


# --- a hub cache whose refs/main is not the pinned commit ------------------------


def _pin(manifest: Path, commit: str) -> None:
    manifest.write_text(manifest.read_text().replace("revision: main", f"revision: {commit}"))
    assert run_cli("lock", str(manifest)).returncode == 0


def test_verify_and_run_warn_when_refs_main_is_not_the_pinned_commit(
    hub: tuple[Path, dict[str, str]],
) -> None:
    manifest, commits = hub
    _pin(manifest, commits["v1"])  # refs/main -> v2
    result = run_cli("verify", str(manifest), "--no-signature")
    assert result.returncode == 0, result.stdout + result.stderr
    err = " ".join(result.stderr.split())
    assert "refs/main" in err and commits["v2"] in err and commits["v1"] in err
    assert f'revision="{commits["v1"]}"' in err
    ran = run_cli("run", str(manifest), "--no-signature", "--", sys.executable, "-c", "print('ok')")
    assert ran.returncode == 0 and "refs/main" in ran.stderr


def test_no_warning_when_refs_main_is_the_pinned_commit(
    hub: tuple[Path, dict[str, str]],
) -> None:
    manifest, commits = hub
    _pin(manifest, commits["v2"])
    result = run_cli("verify", str(manifest), "--no-signature")
    assert result.returncode == 0 and "refs/main" not in result.stderr


# --- one way to name things, JSON everywhere ------------------------------------


def test_lock_prints_what_it_changed_as_json(project: Path) -> None:
    dry = run_cli("lock", str(project), "--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert out["manifest"] == str(project) and out["dry_run"] is True
    assert out["written"] is False and out["exit_code"] == 0
    assert out["changed"] is False and out["lines_changed"] == 0 and out["diff"] == ""
    # a stale pin: a training record was added, so lock rewrites a digest and a count
    train = project.parent / "data" / "train.jsonl"
    train.write_text(train.read_text() + '{"text": "doc 5", "label": "billing"}\n')
    check = run_cli("lock", str(project), "--dry-run", "--check", "--format", "json")
    assert check.returncode == 1
    stale = json.loads(check.stdout)
    assert stale["changed"] is True and stale["lines_changed"] >= 1 and stale["exit_code"] == 1
    assert "+" in stale["diff"] and stale["written"] is False
    done = run_cli("lock", str(project), "--format", "json")
    assert done.returncode == 0, done.stderr
    wrote = json.loads(done.stdout)
    assert wrote["written"] is True and wrote["next"].startswith("sign it: ftmanifest sign")
    assert done.stderr == ""  # the one object on stdout is all there is


def test_keygen_prints_its_key_as_json(tmp_path: Path) -> None:
    key = tmp_path / "k"
    done = run_cli(
        "keygen", "-f", str(key), "--no-passphrase", "--comment", "a@example.org",
        "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["private_key"] == str(key) and out["public_key"] == str(key) + ".pub"
    assert out["encrypted"] is False and out["fingerprint"].startswith("SHA256:")
    assert out["allowed_signers_line"].startswith('a@example.org namespaces="ftmanifest" ssh-')
    assert out["trust_file"] is None and out["principal"] == "a@example.org"
    assert "PRIVATE" not in done.stdout


# --- reproduce: the requirements stay out of the work tree and install ----------


def _signed(project: Path) -> None:
    root = project.parent
    key = root.parent / "k"
    assert run_cli("keygen", "-f", str(key), "--no-passphrase").returncode == 0
    pub = " ".join((root.parent / "k.pub").read_text().split()[:2])
    _add_trust_file(root).write_text(f'me@example.org namespaces="ftmanifest" {pub}\n')
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "trust me")
    from ftmanifest.verify.lock import lock_manifest

    lock_manifest(project)
    assert run_cli("sign", str(project), "--key", str(key), "--replace").returncode == 0


def test_reproduce_leaves_the_work_tree_clean_for_the_next_verify(project: Path) -> None:
    _signed(project)
    root = project.parent.resolve()

    def status() -> str:
        return subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    before = status()
    first = run_cli("reproduce", str(project), "--format", "json")
    assert first.returncode == 0, first.stdout + first.stderr
    req = Path(json.loads(first.stdout)["requirements"])
    assert req.is_file() and root not in req.resolve().parents, req
    assert status() == before  # nothing new in the work tree
    again = run_cli("verify", str(project))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "dirty" not in again.stdout + again.stderr


def test_a_local_torch_build_names_its_index_and_others_become_installable() -> None:
    from ftmanifest.verify.reproduce import installable

    assert installable("torch==2.13.0+cpu") == (
        "torch==2.13.0+cpu", "https://download.pytorch.org/whl/cpu", None,
    )  # fmt: skip
    assert installable("torchvision==0.28.0+cu128")[1] == "https://download.pytorch.org/whl/cu128"
    pin, index, note = installable("mylib==1.2.0+local.7")
    assert pin == "mylib==1.2.0" and index is None and note and "+local.7" in note
    assert installable("numpy==2.4.6") == ("numpy==2.4.6", None, None)
    # a label PyTorch does not publish is not sent to its index
    assert installable("torch==2.13.0+mybuild")[0] == "torch==2.13.0"


# --- audit --fix-perms leaves a shared hub cache alone --------------------------


def test_fix_perms_never_changes_the_shared_hub_cache(
    hub: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    import os
    import stat

    from ftmanifest.results.audit import audit

    manifest, commits = hub
    _pin(manifest, commits["v2"])
    cache = tmp_path / "hf-cache"
    blobs = [p for p in cache.rglob("*") if p.is_file() and not p.is_symlink()]
    assert blobs
    for p in blobs:
        os.chmod(p, 0o666)  # a team cache: group- and world-writable
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("step 1\n")
    os.chmod(run / "logs" / "train.log", 0o666)
    report = audit(run, manifest, signature=False, only=["permissions"], fix_perms=True)
    assert {stat.S_IMODE(p.stat().st_mode) for p in blobs} == {0o666}  # untouched
    assert stat.S_IMODE((run / "logs" / "train.log").stat().st_mode) & 0o022 == 0  # the run's
    rows = [f for f in report.findings if str(cache) in (f.path or "")]
    assert rows and all(f.rule == "audit.permissions-unfixed" for f in rows)
    assert all("shared Hugging Face hub cache" in f.message for f in rows)
    assert all("HF_HUB_CACHE" in (f.hint or "") and "for this user only" in (f.hint or "")
               for f in rows)  # fmt: skip
    # without --fix-perms the hint does not offer --fix-perms for them
    plain = audit(run, manifest, signature=False, only=["permissions"])
    shared = [f for f in plain.findings if str(cache) in (f.path or "")]
    assert shared and not any("--fix-perms" in (f.hint or "") for f in shared)
