"""``ftmanifest check-adapter`` and ``ftmanifest bind`` through the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from tests.adapter.conftest import copy_tree, trust_repo, write_manifest
from tests.conftest import ROOT


def test_accepts_its_base(bound: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    project = bound["llama"]
    rc = main(["check-adapter", str(project / "adapter"), "--manifest", str(project / "exp.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "signed by dev0@example.org" in out and out.rstrip().endswith("OK: bound to this base")


def test_refuses_another_base_with_exit_1(
    bound: dict[str, Path], models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trust = bound["gpt2"] / ".ftmanifest" / "allowed_signers"
    argv = ["check-adapter", str(bound["gpt2"] / "adapter"), "--base", str(models["gpt2-b"]),
            "--trust", str(trust)]  # fmt: skip
    assert main(argv) == 1
    assert "base-weights-differ" in capsys.readouterr().out
    assert main([*argv, "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert [f["rule"] for f in report["findings"]] == ["adapter.base-weights-differ"]


def test_bad_input_exits_2(bound: dict[str, Path], tmp_path: Path) -> None:
    adapter = str(bound["gpt2"] / "adapter")
    assert main(["check-adapter", adapter, "--revision", "0" * 40]) == 2
    assert main(["check-adapter", str(tmp_path), "--base", str(tmp_path)]) == 2
    with pytest.raises(SystemExit) as info:
        main(["check-adapter", adapter, "--base", "x", "--manifest", "y"])
    assert info.value.code == 2


def test_check_adapter_does_not_import_torch(bound: dict[str, Path]) -> None:
    project = bound["gpt2"]
    argv = ["check-adapter", str(project / "adapter"), "--manifest", str(project / "exp.json")]
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"rc = main({argv!r})\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert "RC 0 HEAVY []" in out.stdout, out.stdout + out.stderr


@pytest.fixture
def unbound(models: dict[str, Path], tmp_path: Path, signer: Any) -> tuple[Path, Path]:
    """A project with an unbound adapter, and the signer's key file."""
    from cryptography.hazmat.primitives import serialization

    project = tmp_path / "p"
    project.mkdir()
    trust_repo(project, signer)
    copy_tree(models["gpt2-a"], project / "base")
    copy_tree(models["gpt2-adapter"], project / "adapter")
    write_manifest(project, "base", "gpt2")
    key = tmp_path / "key"
    key.write_bytes(
        signer.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    return project, key


def test_bind_then_check(unbound: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    project, key = unbound
    adapter, manifest = str(project / "adapter"), str(project / "exp.json")
    assert main(["bind", adapter, "--manifest", manifest, "--key", str(key)]) == 0
    out = capsys.readouterr().out
    assert "tensors:   sha256-tensors:" in out and "signed:" in out
    assert main(["check-adapter", adapter, "--manifest", manifest]) == 0


def test_bind_refuses_a_drifted_base(
    unbound: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    project, key = unbound
    shutil.copy(project / "base" / "config.json", project / "base" / "extra.json")
    argv = ["bind", str(project / "adapter"), "--manifest", str(project / "exp.json"),
            "--key", str(key)]  # fmt: skip
    assert main(argv) == 1
    assert "adapter.base-drifted" in capsys.readouterr().err.replace("\n", "")
    assert main([*argv, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["bound"] is False and doc["findings"][0]["field"] == "model.tree_digest"
    assert not (project / "adapter" / "ftmanifest-binding.sig.json").exists()
