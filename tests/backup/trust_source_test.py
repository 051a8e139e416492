"""Trust for a backup comes from the project, never from the storage.

The attacker can write the backups folder and knows the public recipient, but
not the project's signing key: they make a backup with their own key and plant
``.ftmanifest/allowed_signers`` trusting it beside the backups, or turn the
backups folder into its own git repository.  Trust is taken from ``--trust``,
``$FTMANIFEST_TRUST_FILE`` or the project (the repository of the current
folder), and a trust file inside the backups folder is refused whoever named it.
``-R allowed_signers`` encrypts only to the keys that file trusts for ftmanifest now.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.backup.create import Created, create_backup
from ftmanifest.cli import main
from ftmanifest.signing.keys import fingerprint_of_blob, public_key_line

from .conftest import Keys, backup


def _git_init(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    return folder


def _trust_line(key: Any, who: str) -> str:
    return f'{who} namespaces="ftmanifest" {public_key_line(key.public_key(), who)}\n'


def _plant_trust(folder: Path, text: str) -> Path:
    path = folder / ".ftmanifest" / "allowed_signers"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _source(root: Path, text: str) -> Path:
    src = root / "run"
    src.mkdir(parents=True)
    (src / "weights.txt").write_text(text, encoding="utf-8")
    return src


def _attack(keys: Keys, tmp_path: Path, backups: Path) -> Created:
    """The attacker's backup (their key, the team's public recipient) and
    their trust file planted in the backups folder."""
    created = create_backup(
        [_source(tmp_path / "evil", "attacker's weights\n")],
        backups,
        key=keys.other_signing,
        recipients=[keys.recipient],
    )
    _plant_trust(backups, _trust_line(keys.other_signing, "mallory"))
    return created


Cap = pytest.CaptureFixture[str]


def _cli(capsys: Cap, *argv: str) -> tuple[int, dict[str, Any]]:
    """Exit code and JSON output of ``ftmanifest ARGV --format json``."""
    code = main([*argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def _restore(keys: Keys, capsys: Cap, created: Created, dest: Path, *extra: str) -> Any:
    identity = str(keys.identity_path)
    return _cli(capsys, "restore", str(created.archive), "-i", identity, "--to", str(dest), *extra)


def _check(capsys: Cap, folder: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    return _cli(capsys, "backup", "check", str(folder), *extra)


def _outside_git(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, timeout=30
    )
    if top.returncode == 0:
        pytest.skip(f"the test's temporary folder is inside a git work tree ({top.stdout!r})")
    return folder


# -- 1. a trust file planted beside the backups, outside a repository ---------------


def test_planted_trust_outside_a_repository_is_not_used(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    project = _outside_git(tmp_path / "project")
    monkeypatch.chdir(project)
    backups = tmp_path / "backups"
    created = _attack(keys, tmp_path, backups)
    dest = tmp_path / "restored"
    code, doc = _restore(keys, capsys, created, dest)
    assert code == 2, doc
    error = doc["error"]
    assert error["reason"] == "no-trust-file"
    assert error["path"] == str(project / ".ftmanifest" / "allowed_signers")
    assert str(project) in error["observed"]
    assert "backups folder" in error["expected"]  # says it is never taken from there
    assert str(backups) not in error["hint"] and "--trust" in error["hint"]
    assert not dest.exists()
    code, doc = _check(capsys, backups)
    assert (code, doc["error"]["reason"]) == (2, "no-trust-file")
    code, doc = _cli(capsys, "prune", str(backups), "--keep-last", "1")
    assert (code, doc["error"]["reason"]) == (2, "no-trust-file")


def test_the_current_folders_trust_judges_backups_outside_a_repository(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    project = _outside_git(tmp_path / "project")
    trust = _plant_trust(project, _trust_line(keys.signing, "me"))
    monkeypatch.chdir(project)
    backups = tmp_path / "backups"
    evil = _attack(keys, tmp_path, backups)
    code, doc = _restore(keys, capsys, evil, tmp_path / "evil-restored")
    assert (code, doc["error"]["reason"]) == (1, "unknown-key")
    assert fingerprint_of_blob(_blob(keys.other_signing)) in doc["error"]["message"]
    assert str(trust) in doc["error"]["expected"]
    assert not (tmp_path / "evil-restored").exists()
    good = backup(keys, [_source(tmp_path / "good", "our weights\n")], backups)
    code, doc = _restore(keys, capsys, good, tmp_path / "restored")
    assert code == 0, doc
    assert (tmp_path / "restored" / "run" / "weights.txt").read_text() == "our weights\n"


def _blob(key: Any) -> bytes:
    import base64

    return base64.b64decode(public_key_line(key.public_key()).split()[1])


# -- 2. `git init backups` makes the backups folder its own repository root ---------


def _project(keys: Keys, tmp_path: Path) -> tuple[Path, Path]:
    project = _git_init(tmp_path / "project")
    _plant_trust(project, _trust_line(keys.signing, "me"))
    backups = _git_init(project / "backups")
    return project, backups


def test_a_nested_repository_in_the_backups_folder_does_not_bring_its_trust(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    project, backups = _project(keys, tmp_path)
    monkeypatch.chdir(project)
    evil = _attack(keys, tmp_path, backups)
    good = backup(keys, [_source(tmp_path / "good", "our weights\n")], backups)
    code, doc = _restore(keys, capsys, evil, tmp_path / "evil-restored")
    assert (code, doc["error"]["reason"]) == (1, "unknown-key")
    assert str(project / ".ftmanifest" / "allowed_signers") in doc["error"]["expected"]
    assert not (tmp_path / "evil-restored").exists()
    code, doc = _check(capsys, backups)
    assert code == 1
    by_id = {b["backup_id"] or Path(b["metadata"]).name: b for b in doc["backups"]}
    assert by_id[good.meta.backup_id]["ok"]
    refused = by_id[evil.meta_path.name]
    assert [f["rule"] for f in refused["findings"]] == ["backup.unknown-key"]
    assert _restore(keys, capsys, good, tmp_path / "restored")[0] == 0


def test_the_untrusted_signers_archive_is_not_an_orphan_to_delete(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    project, backups = _project(keys, tmp_path)
    monkeypatch.chdir(project)
    evil = _attack(keys, tmp_path, backups)
    code, doc = _check(capsys, backups)
    assert code == 1
    about_archive = [f for f in doc["findings"] if f["path"] == str(evil.archive)]
    assert about_archive == [], "an archive whose metadata was refused is no leftover"
    (refused,) = doc["backups"][0]["findings"]
    assert "not trusted" in refused["message"]
    assert fingerprint_of_blob(_blob(keys.other_signing)) in refused["message"]
    assert str(project / ".ftmanifest" / "allowed_signers") in refused["expected"]
    assert "delete" not in (refused["hint"] or "")


@pytest.mark.parametrize("how", ["current folder", "--trust", "environment", "symlink"])
def test_a_trust_file_inside_the_backups_folder_is_refused(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap, how: str
) -> None:
    project, backups = _project(keys, tmp_path)
    evil = _attack(keys, tmp_path, backups)
    planted = backups / ".ftmanifest" / "allowed_signers"
    extra: list[str] = []
    monkeypatch.chdir(project)
    if how == "current folder":  # `cd backups`: its own repository root is the backups folder
        monkeypatch.chdir(backups)
    elif how == "--trust":
        extra = ["--trust", str(planted)]
    elif how == "environment":
        monkeypatch.setenv("FTMANIFEST_TRUST_FILE", str(planted))
    else:
        ours = project / ".ftmanifest" / "allowed_signers"
        ours.unlink()
        ours.symlink_to(planted)
    dest = tmp_path / "restored"
    code, doc = _restore(keys, capsys, evil, dest, *extra)
    assert code == 1, doc
    error = doc["error"]
    assert error["reason"] == "insecure-trust-path"
    assert "inside the backups folder" in error["message"]
    assert str(backups) in error["observed"]
    assert "--trust" in error["hint"]
    assert not dest.exists()
    code, doc = _check(capsys, backups, *extra)
    assert (code, doc["error"]["reason"]) == (1, "insecure-trust-path")


# -- 7. -R allowed_signers encrypts only to keys the file trusts for ftmanifest now ---


def _ssh_identity(folder: Path, name: str) -> tuple[Any, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
        )
    return key, path


_TEAM = {
    "alice": 'namespaces="ftmanifest"',
    "bob": 'namespaces="ftmanifest",valid-before="20200101"',
    "carol": 'namespaces="ftmanifest",valid-after="29990101"',
    "dave": 'namespaces="git"',
    "erin": 'cert-authority,namespaces="ftmanifest"',
    "frank": "",
}
_WHY = {
    "bob": "expired",
    "carol": "not yet valid",
    "dave": "ftmanifest",
    "erin": "cert-authority",
    "frank": "namespaces",
}


def _team(tmp_path: Path, names: list[str]) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path / "team"
    folder.mkdir()
    lines, paths = ["# the team"], {}
    for name in names:
        key, paths[name] = _ssh_identity(folder, name)
        options = [_TEAM[name]] if _TEAM[name] else []
        lines.append(" ".join([name, *options, public_key_line(key.public_key(), name)]))
    team = folder / "allowed_signers"
    team.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return team, paths


def test_recipients_from_allowed_signers_follow_the_trust_rules(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team, identities = _team(tmp_path, list(_TEAM))
    out = tmp_path / "backups"
    argv = ["backup", "create", str(_source(tmp_path, "w\n")), "--to", str(out), "--key",
            str(keys.signing_path), "-R", str(team), "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [r["key"].split()[0] for r in doc["predicate"]["recipients"]] == ["ssh-ed25519"]
    alice = public_key_line(_load(identities["alice"]).public_key()).split()[1]
    assert [r["key"].split()[1] for r in doc["predicate"]["recipients"]] == [alice]
    for lineno, name in enumerate(_TEAM, start=2):
        if name == "alice":
            continue
        said = [line for line in captured.err.splitlines() if f"{team}:{lineno}:" in line]
        assert said and "warning" in said[0] and _WHY[name] in said[0], (name, captured.err)
    meta = Path(doc["metadata"])
    trust = ["--trust", str(keys.trust_path)]
    for name, path in identities.items():
        dest = tmp_path / f"restored-{name}"
        code, doc = _cli(capsys, "restore", str(meta), "-i", str(path), "--to", str(dest), *trust)
        if name == "alice":
            assert code == 0, doc
        else:  # the expired, future, git-only, CA and namespace-less keys cannot open it
            assert (code, doc["error"]["reason"]) == (1, "wrong-identity"), name


def _load(path: Path) -> Any:
    from ftmanifest.signing.keys import load_private_key

    return load_private_key(path)


def test_an_allowed_signers_file_with_no_current_key_is_refused(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team, _ = _team(tmp_path, ["bob", "dave", "erin"])
    out = tmp_path / "backups"
    argv = ["backup", "create", str(_source(tmp_path, "w\n")), "--to", str(out), "--key",
            str(keys.signing_path), "-R", str(team), "--format", "json"]  # fmt: skip
    assert main(argv) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["reason"], error["path"]) == ("bad-recipient", str(team))
    for lineno, name in enumerate(["bob", "dave", "erin"], start=2):
        assert f"{team}:{lineno}" in error["observed"] and _WHY[name] in error["observed"]
    assert not out.exists()


# -- messages -------------------------------------------------------------------------


def test_malformed_metadata_is_not_told_to_re_sign_the_manifest(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Cap
) -> None:
    project, backups = _project(keys, tmp_path)
    monkeypatch.chdir(project)
    good = backup(keys, [_source(tmp_path / "good", "our weights\n")], backups)
    good.meta_path.write_bytes(good.meta_path.read_bytes()[:-40])
    code, doc = _restore(keys, capsys, good, tmp_path / "restored")
    assert code in (1, 2)
    hint = doc["error"]["hint"]
    assert "re-sign the manifest" not in hint and "backup" in hint, hint
    code, doc = _check(capsys, backups)
    (finding,) = doc["backups"][0]["findings"]
    assert "re-sign the manifest" not in finding["hint"] and "backup" in finding["hint"]
