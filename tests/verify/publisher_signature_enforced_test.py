"""A publisher-signed base that ``lock`` accepted is refused by all three checkers
(``verify``, ``run`` and the Trainer guard) once its ``model.sig`` no longer holds:
another (valid) signature put in its place, one byte of the weights changed, or the
publisher's key taken out of the trust file.  The base is a real tiny GPT-2, signed
by the real ``model_signing`` CLI; the guard trains it with a real ``Trainer``.
Each attack has the control beside it: the untouched project passes all three."""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.manifest import load_manifest
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.adapter.conftest import copy_tree, models, signer, trust_repo, write_manifest
from tests.adapter.trainer_bind_test import _train
from tests.conftest import ENV, git, run_cli
from tests.verify.publisher_signature_test import _keys, _publisher_sign

__all__ = ["models", "signer"]

pytest.importorskip("model_signing")
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")
PRINCIPAL = "pub@example.org"
COMMAND = (sys.executable, "-c", "print('RAN')")


def _keygen(key: Path) -> Path:
    return _keys(key.parent, key.name)


@pytest.fixture(scope="module")
def pristine(
    models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, signer: Any
) -> tuple[Path, str]:
    """A repository whose base carries the publisher's model.sig, trusted and locked,
    built once (a model_signing run, a lock): each test tampers with its own copy."""
    top = tmp_path_factory.mktemp("publisher-signed")
    root = top / "project"
    root.mkdir()
    trust_repo(root, signer)
    copy_tree(models["gpt2-a"], root / "base")
    (root / ".gitignore").write_text("out/\n")
    manifest = write_manifest(root, "base", "gpt2", training={"micro_batch": 2, "max_steps": 2})
    keys = top / "keys"
    keys.mkdir()
    publisher = _keygen(keys / "publisher")
    _publisher_sign(root / "base", publisher)
    with pytest.MonkeyPatch.context() as mp:
        _environment(mp, root)
        assert main(["trust", "add", f"{publisher}.pub.pem", "--principal", PRINCIPAL]) == 0
        git(root, "add", "-A")
        git(root, "commit", "-qm", "publisher-signed base and manifest")
        lock_manifest(manifest)
        git(root, "commit", "-qam", "lock")
    record = load_manifest(manifest).manifest.model.publisher_signature
    assert record is not None and record.signer == PRINCIPAL
    return top, str(manifest.relative_to(root))


@pytest.fixture
def signed(
    pristine: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """This test's own copy of the pristine project (and the keys beside it)."""
    top, manifest = pristine
    shutil.copytree(top, tmp_path / "copy", symlinks=True)
    root = tmp_path / "copy" / "project"
    _environment(monkeypatch, root)
    return root, root / manifest


def _environment(mp: pytest.MonkeyPatch, root: Path) -> None:
    """The variables lock pins as the CLI subprocesses see them (``ENV``): another test
    in this worker may have left its own value (transformers' full determinism sets
    CUBLAS_WORKSPACE_CONFIG), and the in-process lock would pin that instead."""
    mp.chdir(root)
    mp.delenv("FTMANIFEST_TRUST_FILE", raising=False)
    for name, value in ENV.items():
        mp.setenv(name, value)


def _replace_sig(root: Path) -> None:
    _publisher_sign(root / "base", _keygen(root.parent / "keys" / "intruder"))


def _change_weights(root: Path) -> None:
    weights = root / "base" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # a weight, not the header: the model still loads
    weights.write_bytes(bytes(data))


def _untrust_publisher(root: Path) -> None:
    trust = root / ".ftmanifest" / "allowed_signers"
    kept = [line for line in trust.read_text().splitlines() if not line.startswith(PRINCIPAL)]
    assert len(kept) == 1  # the project's own signer stays
    trust.write_text("\n".join(kept) + "\n")


TAMPERS: dict[str, Callable[[Path], None]] = {
    "another-signature": _replace_sig,
    "weights-changed": _change_weights,
    "publisher-untrusted": _untrust_publisher,
}


def _rows_text(rows: list[Any]) -> str:
    return "\n".join(f"{f.path} {f.message} {f.expected} {f.observed} {f.hint}" for f in rows)


def _names_the_signature(text: str, tamper: str) -> bool:
    if tamper == "weights-changed":
        return "model.safetensors" in text
    return "model.sig" in text


def test_control_all_three_checkers_accept_the_untouched_model(signed: tuple[Path, Path]) -> None:
    root, manifest = signed
    assert verify_manifest(manifest, signature=False).findings == []
    done = run_cli("run", str(manifest), "--no-signature", "--", *COMMAND, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RAN" in done.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        guard = _train(root, manifest, root / "out")
    record = json.loads((root / "out" / "ftmanifest-run.json").read_text())
    assert guard is not None and record["attempt"]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_verify_refuses_a_model_sig_that_no_longer_holds(
    signed: tuple[Path, Path], tamper: str
) -> None:
    root, manifest = signed
    TAMPERS[tamper](root)
    rows = verify_manifest(manifest, signature=False).findings
    errors = [f for f in rows if f.severity == "error"]
    assert errors, rows
    text = _rows_text(errors)
    assert _names_the_signature(text, tamper), text
    done = run_cli("verify", str(manifest), "--no-signature", env=ENV)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_run_refuses_before_the_command_starts(signed: tuple[Path, Path], tamper: str) -> None:
    root, manifest = signed
    TAMPERS[tamper](root)
    done = run_cli("run", str(manifest), "--no-signature", "--", *COMMAND, env=ENV)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "RAN" not in done.stdout
    assert _names_the_signature(done.stdout + done.stderr, tamper), done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_the_trainer_guard_refuses_before_step_one(signed: tuple[Path, Path], tamper: str) -> None:
    from ftmanifest.integrations.transformers import DriftRefusedError

    root, manifest = signed
    TAMPERS[tamper](root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DriftRefusedError) as refused:
            _train(root, manifest, root / "out")
    text = _rows_text(refused.value.findings)
    assert _names_the_signature(text, tamper), text
    assert not list((root / "out").glob("checkpoint-*"))  # no step was taken
