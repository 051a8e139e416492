"""``ftmanifest reproduce M``: signature first, rows by group, exact pins, commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ftmanifest.verify.lock import lock_manifest
from tests.conftest import ENV, git, hub_project, run_cli

REV = "0123456789abcdef0123456789abcdef01234567"


def _trusted(project: Path) -> Path:
    """Sign ``project`` with a fresh key its repo trusts; return the key."""
    root = project.parent
    key = root.parent / "k"
    assert run_cli("keygen", "-f", str(key), "--no-passphrase").returncode == 0
    pub = (root.parent / "k.pub").read_text().split()[:2]
    (root / ".ftmanifest").mkdir()
    (root / ".ftmanifest" / "allowed_signers").write_text(
        f'me@example.org namespaces="ftmanifest" {" ".join(pub)}\n'
    )
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "trust me")
    lock_manifest(project)
    _sign(project, key)
    return key


def _sign(project: Path, key: Path) -> None:
    result = run_cli("sign", str(project), "--key", str(key), "--replace")
    assert result.returncode == 0, result.stdout + result.stderr


def test_untrusted_signature_is_refused_before_anything_is_written(project: Path) -> None:
    req = project.parent / "req.txt"
    unsigned = run_cli("reproduce", str(project), "--requirements", str(req), env=ENV)
    assert unsigned.returncode in (1, 2) and "not signed" in unsigned.stderr
    assert not req.exists()
    _trusted(project)
    # a key nobody trusts signs it: refused, nothing written
    other = project.parent.parent / "other"
    assert run_cli("keygen", "-f", str(other), "--no-passphrase").returncode == 0
    _sign(project, other)
    untrusted = run_cli("reproduce", str(project), "--requirements", str(req), env=ENV)
    assert untrusted.returncode in (1, 2), untrusted.stdout + untrusted.stderr
    assert "Traceback" not in untrusted.stderr
    assert not req.exists()
    assert not project.with_name("exp.requirements.txt").exists()


def test_trusted_manifest_on_this_machine_is_reproducible(project: Path) -> None:
    _trusted(project)
    result = run_cli("reproduce", str(project), env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "signature:    trusted" in result.stdout and "me@example.org" in result.stdout
    assert "REPRODUCIBLE here" in result.stdout
    assert not project.with_name("exp.requirements.txt").exists()  # never in the work tree
    req = Path(re.search(r"^requirements: (.+) \(", result.stdout, re.M).group(1))  # type: ignore[union-attr]
    lines = req.read_text().splitlines()
    assert (
        "--extra-index-url https://download.pytorch.org/whl/cpu  # PyTorch's local builds" in lines
    )
    pins = [line for line in lines if not line.startswith(("#", "--"))]
    assert "torch==2.13.0+cpu" in pins and "numpy==2.4.6" in pins
    assert all(p.count("==") == 1 and not p.split("==")[1].startswith("=") for p in pins)
    assert len(pins) == len(set(pins)) >= 9  # the ML packages installed here (trl, datasets in CI)


def test_two_changed_packages_are_exactly_two_rows(project: Path) -> None:
    key = _trusted(project)
    text = project.read_text()
    for old, new in (
        ("torch: ==2.13.0+cpu", "torch: ==2.14.0"),
        ("numpy: ==2.4.6", "numpy: ==2.5.0"),
    ):
        assert text.count(old) == 1
        text = text.replace(old, new)
    project.write_text(text)
    changed = run_cli("reproduce", str(project), env=ENV)
    assert changed.returncode in (1, 2) and "manifest-changed" in changed.stderr  # not re-signed
    _sign(project, key)
    req = project.parent / "out" / "req.txt"
    req.parent.mkdir()
    result = run_cli(
        "reproduce", str(project), "--requirements", str(req), "--format", "json", env=ENV
    )
    assert result.returncode == 1, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    assert plan["reproducible"] is False and plan["platform_change"] is False
    assert set(plan["groups"]) == {"packages"}
    rows = plan["groups"]["packages"]
    assert sorted(r["field"] for r in rows) == [
        "environment.packages.numpy",
        "environment.packages.torch",
    ]
    assert "torch==2.14.0" in req.read_text() and "numpy==2.5.0" in req.read_text()
    assert plan["requirements"] == str(req)
    assert plan["signature"]["valid_keyids"]


def _hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, revision: str) -> Path:
    manifest = (
        "ftmanifest: 1\nexperiment: {id: hub-exp}\n"
        f"model: {{repo: org/tiny, revision: {revision}}}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
    )
    path, _ = hub_project(
        tmp_path,
        monkeypatch,
        {"v1": {"config.json": b"{}"}},
        main="v1",
        manifest=manifest,
    )
    return path


def test_missing_hub_snapshot_gives_the_download_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _hub(tmp_path, monkeypatch, REV)
    result = run_cli("reproduce", str(path), "--no-signature")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"hf download org/tiny --revision {REV}\n" in result.stdout
    assert "model (snapshot missing here)" in result.stdout
    assert "signature NOT checked" in result.stderr


def test_unpinned_hub_revision_gets_no_download_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _hub(tmp_path, monkeypatch, "some-branch")
    result = run_cli("reproduce", str(path), "--no-signature", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    assert not any(c.startswith("hf download") for c in plan["commands"])
    assert any("manifest is not pinned" in n for n in plan["notes"])


def test_platform_change_is_called_out(project: Path) -> None:
    key = _trusted(project)
    project.write_text(project.read_text().replace("    kind: cpu\n", "    kind: cuda\n", 1))
    _sign(project, key)
    result = run_cli("reproduce", str(project), env=ENV)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "platform differs (" in result.stdout and "-> cpu" in result.stdout
    assert "redo the start and quality checks" in result.stdout


def test_two_packages_and_a_missing_snapshot_are_exactly_what_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's scenario: signed by a trusted key; on this machine two package
    versions differ and the model snapshot is not in the cache: exactly those rows,
    the requirements written with the manifest's pins, the download command, exit 1."""
    from importlib.metadata import version

    manifest = (
        "ftmanifest: 1\nexperiment: {id: hub-exp}\n"
        "model: {repo: org/tiny, revision: main}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
        "environment:\n  packages:\n"
        f"    numpy: =={version('numpy')}\n    packaging: =={version('packaging')}\n"
        f"    pyyaml: =={version('pyyaml')}\n"
    )
    path, commits = hub_project(
        tmp_path, monkeypatch, {"v1": {"config.json": b"{}"}}, "v1", manifest
    )
    lock_manifest(path)  # pins the snapshot's commit and files, then it goes away
    import shutil

    shutil.rmtree(tmp_path / "hf-cache" / "models--org--tiny" / "snapshots" / commits["v1"])
    text = path.read_text()  # the colleague's machine had two other versions
    for name, new in (("numpy", f"{version('numpy')}.post99"), ("packaging", "0.0.1")):
        old = f"{name}: =={version(name)}\n"
        assert text.count(old) == 1, text
        text = text.replace(old, f"{name}: =={new}\n")
    path.write_text(text)
    key = tmp_path / "k"
    assert run_cli("keygen", "-f", str(key), "--no-passphrase").returncode == 0
    pub = (tmp_path / "k.pub").read_text().split()[:2]
    (path.parent / ".ftmanifest").mkdir()
    (path.parent / ".ftmanifest" / "allowed_signers").write_text(
        f'me@example.org namespaces="ftmanifest" {" ".join(pub)}\n'
    )
    _sign(path, key)
    req = tmp_path / "req.txt"
    result = run_cli("reproduce", str(path), "--requirements", str(req), "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    assert plan["signature"]["valid_keyids"]
    rows = {g: sorted(r["field"] for r in found) for g, found in plan["groups"].items()}
    assert rows.pop("packages") == ["environment.packages.numpy", "environment.packages.packaging"]
    assert set(rows) == {"model"}, rows
    assert f"hf download org/tiny --revision {commits['v1']}" in plan["commands"]
    pins = req.read_text()
    assert f"numpy=={version('numpy')}.post99" in pins and "packaging==0.0.1" in pins
