"""Trust: each attack on where trust comes from, end to end.

Real keys from ``ftmanifest keygen``, real git repositories, the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from signing_helpers import git_init

from ftmanifest import cli
from ftmanifest.manifest import load_manifest
from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import PAYLOAD_TYPE, Envelope, parse_envelope
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.verify import verify_manifest_signature
from tests.conftest import within

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "docroute-lora-r16.yaml"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real key pairs: alice (the team's) and mallory (the attacker's)."""
    folder = tmp_path_factory.mktemp("keys")
    for name in ("alice", "mallory"):
        assert cli.main(["keygen", "-f", str(folder / name), "--no-passphrase"]) == 0
    return folder


def trust_text(keys: Path, *names: str) -> str:
    lines = []
    for name in names:
        kind, b64 = (keys / f"{name}.pub").read_text().split()[:2]
        lines.append(f'{name}@example.org namespaces="ftmanifest" {kind} {b64}')
    return "\n".join(lines) + "\n"


def plant_trust(folder: Path, text: str) -> Path:
    path = folder / ".ftmanifest" / "allowed_signers"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def manifest_in(folder: Path, name: str = "exp.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE, folder / name)
    return folder / name


def sign(manifest: Path, keys: Path, who: str) -> int:
    return cli.main(["sign", str(manifest), "--key", str(keys / who)])


def signers_json(
    manifest: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["signers", str(manifest), "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def verify_lib(manifest: Path) -> object:
    return verify_manifest_signature(manifest, load_manifest(manifest).canonical())


# --- 1. a planted .git moves the trust root ----------------------------------


@pytest.mark.parametrize("planted", ["empty .git file", "real repository"])
def test_planted_git_in_a_world_writable_parent_is_not_trusted(
    tmp_path: Path, keys: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    shared = tmp_path / "shared"  # stands for /tmp: anyone may create entries here
    shared.mkdir()
    shared.chmod(0o1777)
    if planted == "real repository":
        git_init(shared)
    else:
        (shared / ".git").write_text("")
    plant_trust(shared, trust_text(keys, "mallory"))
    victim = manifest_in(shared / "victim" / "run")
    assert sign(victim, keys, "mallory") == 0
    code, doc = signers_json(victim, capsys)
    if planted == "real repository":  # git accepts it: StrictModes refuses /tmp-like folders
        assert code == 1 and doc["error"]["reason"] == "insecure-trust-path"
        assert doc["error"]["path"] == str(shared)
        assert "writable by group and others (mode 1777)" in doc["error"]["message"]
        with pytest.raises(E.InsecureTrustPathError):
            verify_lib(victim)
    else:  # git sees no repository: only the manifest's own folder is searched
        assert code == 2 and doc["error"]["reason"] == "no-trust-file"
        with pytest.raises(E.TrustFileNotFoundError):
            verify_lib(victim)


def test_trust_path_owned_by_someone_else_is_refused(tmp_path: Path, keys: Path, capsys) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    repo = git_init(tmp_path / "repo")
    trust = plant_trust(repo, trust_text(keys, "alice"))
    manifest = manifest_in(repo / "m")
    assert sign(manifest, keys, "alice") == 0
    assert signers_json(manifest, capsys)[0] == 0
    os.chown(trust, 4242, 4242)
    code, doc = signers_json(manifest, capsys)
    assert code == 1 and doc["error"]["reason"] == "insecure-trust-path"
    assert "owned by uid 4242" in doc["error"]["message"] and doc["error"]["path"] == str(trust)


def test_group_writable_trust_file_is_refused_with_the_fix(tmp_path: Path, keys: Path, capsys):
    repo = git_init(tmp_path / "repo")
    trust = plant_trust(repo, trust_text(keys, "alice"))
    manifest = manifest_in(repo / "m")
    assert sign(manifest, keys, "alice") == 0
    trust.chmod(0o664)
    capsys.readouterr()
    assert cli.main(["signers", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"trust file {trust} is writable by group (mode 0664)" in err
    assert f"chmod go-w {trust}" in err and "insecure-trust-path" in err


# --- 2. a symlinked manifest takes its trust from the link's folder ----------


def test_symlinked_manifest_is_judged_by_the_links_repository(tmp_path: Path, keys: Path, capsys):
    ours = git_init(tmp_path / "ours")
    plant_trust(ours, trust_text(keys, "alice"))
    theirs = git_init(tmp_path / "theirs")
    plant_trust(theirs, trust_text(keys, "mallory"))
    target = manifest_in(theirs / "m")
    link = ours / "exp.yaml"
    link.symlink_to(target)
    assert sign(link, keys, "mallory") == 0
    code, doc = signers_json(link, capsys)
    assert code == 1 and doc["error"]["reason"] == "unknown-key"
    source = doc["trust_source"]
    assert source["path"] == str(ours / ".ftmanifest" / "allowed_signers")
    assert (source["how"], source["searched_from"], source["root"]) == (
        "repository",
        str(ours),
        str(ours),
    )
    capsys.readouterr()
    assert cli.main(["signers", str(link)]) == 1
    out = capsys.readouterr().out
    assert f"(repository root {ours}, searched from {ours})" in out
    assert sign(link, keys, "alice") == 0
    assert signers_json(link, capsys)[0] == 0
    given = ours / "given_signers"
    given.write_text(trust_text(keys, "alice"))
    code, doc = signers_json(link, capsys, "--trust", str(given))
    assert code == 0 and doc["trust_source"]["description"] == "given by --trust"


# --- 3. untrusted files have limits ------------------------------------------


def _signed_repo(tmp_path: Path, keys: Path) -> Path:
    repo = git_init(tmp_path / "repo")
    plant_trust(repo, trust_text(keys, "alice"))
    manifest = manifest_in(repo / "m")
    assert sign(manifest, keys, "alice") == 0
    return manifest


def test_fifo_envelope_is_refused_without_blocking(tmp_path: Path, keys: Path) -> None:
    manifest = _signed_repo(tmp_path, keys)
    envelope = envelope_path_for(manifest)
    envelope.unlink()
    os.mkfifo(envelope)
    with pytest.raises(E.NotRegularFileError) as info:
        within(10, lambda: verify_lib(manifest))
    assert "FIFO" in info.value.message and info.value.exit_code == 2


def test_fifo_trust_file_is_refused_without_blocking(tmp_path: Path, keys: Path) -> None:
    manifest = _signed_repo(tmp_path, keys)
    fifo = tmp_path / "signers.fifo"
    os.mkfifo(fifo)
    with pytest.raises(E.NotRegularFileError):
        within(
            10,
            lambda: verify_manifest_signature(
                manifest, load_manifest(manifest).canonical(), trust_path=fifo
            ),
        )


def test_envelope_linked_to_dev_zero_is_refused(tmp_path: Path, keys: Path) -> None:
    manifest = _signed_repo(tmp_path, keys)
    envelope = envelope_path_for(manifest)
    envelope.unlink()
    envelope.symlink_to("/dev/zero")
    with pytest.raises(E.NotRegularFileError) as info:
        within(10, lambda: verify_lib(manifest))
    assert info.value.observed == "a character device"


def test_a_symlink_to_a_regular_envelope_is_followed(tmp_path: Path, keys: Path) -> None:
    manifest = _signed_repo(tmp_path, keys)
    envelope = envelope_path_for(manifest)
    moved = envelope.with_name("elsewhere.json")
    envelope.rename(moved)
    envelope.symlink_to(moved.name)
    verify_lib(manifest)


@pytest.mark.parametrize("which", ["envelope", "trust"])
def test_oversized_files_are_refused(tmp_path: Path, keys: Path, which: str) -> None:
    manifest = _signed_repo(tmp_path, keys)
    big = b" " * (1 << 20) + b"\n"
    if which == "envelope":
        envelope_path_for(manifest).write_bytes(big)
    else:
        trust = manifest.parents[1] / ".ftmanifest" / "allowed_signers"
        trust.write_bytes(trust.read_bytes() + b"#" + big)
    with pytest.raises(E.FileTooLargeError) as info:
        verify_lib(manifest)
    assert info.value.expected == f"at most {1 << 20} bytes" and info.value.exit_code == 2


def test_too_many_signatures_are_refused_before_any_is_checked(tmp_path: Path, keys: Path) -> None:
    manifest = _signed_repo(tmp_path, keys)
    path = envelope_path_for(manifest)
    env = parse_envelope(path.read_bytes(), str(path))
    many = Envelope(PAYLOAD_TYPE, env.payload, env.signatures * 65)
    path.write_bytes(many.to_bytes())
    with pytest.raises(E.TooManySignaturesError) as info:
        verify_lib(manifest)
    assert info.value.observed == "65" and info.value.exit_code == 2
    path.write_bytes(Envelope(PAYLOAD_TYPE, env.payload, env.signatures * 64).to_bytes())
    verify_lib(manifest)  # 64 is allowed (one key signing many times counts once)


def test_a_folder_as_envelope_or_trust_is_exit_2(tmp_path: Path, keys: Path, capsys) -> None:
    manifest = _signed_repo(tmp_path, keys)
    assert cli.main(["signers", str(manifest), "--trust", str(tmp_path)]) == 2
    assert "not-regular-file" in capsys.readouterr().err
    envelope = envelope_path_for(manifest)
    envelope.unlink()
    envelope.mkdir()
    assert cli.main(["signers", str(manifest)]) == 2
    assert "is a folder, not a regular file" in capsys.readouterr().err
    assert sign(manifest, keys, "alice") == 2
    assert "not-regular-file" in capsys.readouterr().err
