"""Where ``ledger check`` takes its trust from.

Whoever can append to a ledger can write the folder around it, so the trust
file comes from the project: ``--trust``, ``$FTMANIFEST_TRUST_FILE``, else
``.ftmanifest/allowed_signers`` at the root of the repository holding
``--manifest M`` (or the current folder).  A file beside a ledger elsewhere is
not trust, and ``--require-signed`` without any trust file is a refusal that
names where trust was looked for - never "not checked", exit 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger import Ledger
from ftmanifest.ledger.recordfile import KEY_ENV
from ftmanifest.signing.locate import TRUST_ENV
from tests.conftest import CLF, git
from tests.ledger.conftest import KeyPair, body, fill, ledger_cli, rules


def _check(folder: Path, cwd: Path, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    out = ledger_cli(folder, "check", "--format", "json", *args, cwd=cwd, env=env)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, report


def _signed_by(folder: Path, who: KeyPair, monkeypatch: pytest.MonkeyPatch, n: int = 2) -> None:
    monkeypatch.setenv(KEY_ENV, str(who.key))
    fill(Ledger(folder), n)
    monkeypatch.delenv(KEY_ENV)


def _project(folder: Path, trust: KeyPair | None) -> Path:
    """A project folder (no repository), trusting ``trust`` when given."""
    (folder / ".ftmanifest").mkdir(parents=True)
    if trust is not None:
        shutil.copy(trust.trust, folder / ".ftmanifest" / "allowed_signers")
    return folder


def test_require_signed_without_a_trust_file_is_refused_naming_where_it_looked(
    tmp_path: Path,
) -> None:
    """The attack: junk signatures, no trust file anywhere: it used to say
    "ledger ok: 2 signed (not checked: no trust file)" and exit 0."""
    folder = tmp_path / "storage" / "ledger"
    for entry in fill(Ledger(folder), 2):
        data = body(entry.file)
        data["signature"] = {"payload": "AAAA", "payloadType": "x", "signatures": [{"sig": "AA"}]}
        entry.file.write_text(json.dumps(data))
    project = _project(tmp_path / "project", None)
    code, report = _check(folder, project, "--require-signed")
    assert code == 1 and rules(report) == ["ledger.no-trust"], report
    (problem,) = report["problems"]
    looked = str(project / ".ftmanifest" / "allowed_signers")
    assert problem["file"] == looked and str(project) in problem["observed"]
    assert "--trust" in problem["expected"] and problem["hint"]
    text = ledger_cli(folder, "check", "--require-signed", cwd=project)
    assert text.returncode == 1 and "ledger.no-trust" in text.stdout
    assert looked in text.stdout and "Traceback" not in text.stderr
    # without --require-signed the links are judged and the output says where it looked
    plain = ledger_cli(folder, "check", cwd=project)
    assert plain.returncode == 0 and f"not checked: no trust file at {looked}" in plain.stdout


def test_a_trust_file_planted_beside_the_ledger_is_not_used(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacker signs with their own key and writes an allowed_signers
    beside the ledger (and a .ftmanifest/ one, as a project would have it)."""
    mine, stranger = keys
    storage = tmp_path / "storage"
    folder = storage / "ledger"
    _signed_by(folder, stranger, monkeypatch)
    shutil.copy(stranger.trust, storage / "allowed_signers")
    _project(storage, stranger)
    trusted = _project(tmp_path / "project", mine)
    code, report = _check(folder, trusted, "--require-signed")
    assert code == 1 and rules(report) == ["ledger.bad-signature"] * 2, report
    code, report = _check(folder, _project(tmp_path / "bare", None), "--require-signed")
    assert code == 1 and rules(report) == ["ledger.no-trust"], report


def test_trust_comes_from_the_manifests_repository(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--manifest M``: the trust file at the root of M's repository, as for M's
    own signature; a repository made inside the ledger folder changes nothing."""
    mine, stranger = keys
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    _project(repo, mine)
    manifest = repo / "m.yaml"
    shutil.copy(CLF, manifest)
    folder = repo / ".ftmanifest" / "ledger"
    _signed_by(folder, mine, monkeypatch)
    elsewhere = _project(tmp_path / "elsewhere", stranger)
    code, report = _check(folder, elsewhere, "--manifest", str(manifest), "--require-signed")
    assert (code, report["signatures_checked"]) == (0, True), report
    assert report["trust"]["path"] == str(repo / ".ftmanifest" / "allowed_signers")
    # from another project, that project's trust judges: the stranger's
    assert _check(folder, elsewhere, "--require-signed")[0] == 1


def test_the_trust_environment_variable_and_option_are_used(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, stranger = keys
    folder = tmp_path / "ledger"
    _signed_by(folder, mine, monkeypatch)
    bare = _project(tmp_path / "bare", stranger)
    env = {TRUST_ENV: str(mine.trust)}
    assert _check(folder, bare, "--require-signed", **env)[0] == 0
    code, report = _check(folder, bare, "--require-signed", "--trust", str(stranger.trust), **env)
    assert code == 1 and rules(report) == ["ledger.bad-signature"] * 2  # --trust beats it


def test_a_trust_file_inside_the_ledger_folder_is_refused(
    tmp_path: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when named by --trust: whoever appends records could have written it."""
    mine, _ = keys
    folder = tmp_path / "ledger"
    _signed_by(folder, mine, monkeypatch)
    planted = folder / "sub" / "allowed_signers"
    planted.parent.mkdir()
    shutil.copy(mine.trust, planted)
    out = ledger_cli(folder, "check", "--trust", str(planted), cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "inside the ledger folder" in out.stderr and str(planted) in out.stderr
    assert "Traceback" not in out.stderr
