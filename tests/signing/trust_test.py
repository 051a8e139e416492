"""allowed_signers parsing, trust-file discovery and key status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_helpers import git_init, trust_line

from ftmanifest.signing import errors as E
from ftmanifest.signing.keys import fingerprint, public_key_line
from ftmanifest.signing.locate import choose_trust_file, find_trust_file
from ftmanifest.signing.trust import load_trust, parse_trust

# A fixed key: parametrised ids must be identical in every xdist worker.
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUB = public_key_line(KEY.public_key())
FP = fingerprint(KEY.public_key())
UTC = timezone.utc


def parse(text: str):
    return parse_trust(text, Path("allowed_signers"))


def test_full_syntax() -> None:
    store = parse(
        "# team signers\n"
        "\n"
        f'"alice@example.org,bob smith@x" namespaces="git,ftmanifest",'
        f'valid-after="20240101",valid-before="20301231235959Z" {PUB} laptop key\n'
        f'   carol@*.example.org NAMESPACES="ft*" {PUB}\n'
    )
    first, second = store.keys
    assert first.principals == ("alice@example.org", "bob smith@x")
    assert first.namespaces == ("git", "ftmanifest") and first.fingerprint == FP
    assert first.valid_before == datetime(2030, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    assert first.valid_after == datetime(2024, 1, 1).astimezone().timestamp()  # local time
    assert (first.line, second.line) == (3, 4)
    assert second.matches_principal("carol@ml.example.org")
    assert not second.matches_principal("carol@example.com")
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert first.status(now) == second.status(now) == "valid"


@pytest.mark.parametrize(
    ("options", "now", "status"),
    [
        ('namespaces="git"', datetime(2025, 1, 1, tzinfo=UTC), "wrong-namespace"),
        ("", datetime(2025, 1, 1, tzinfo=UTC), "wrong-namespace"),  # stricter than ssh
        ('namespaces="*,!ftmanifest"', datetime(2025, 1, 1, tzinfo=UTC), "wrong-namespace"),
        (
            'namespaces="ftmanifest",valid-before="20241231Z"',
            datetime(2025, 1, 1, tzinfo=UTC),
            "expired-key",
        ),
        (
            'namespaces="ftmanifest",valid-after="202501020000Z"',
            datetime(2025, 1, 1, tzinfo=UTC),
            "not-yet-valid",
        ),
        (
            'namespaces="ftmanifest",valid-after="202501020000Z"',
            datetime(2025, 1, 2, tzinfo=UTC),
            "valid",
        ),
    ],
)
def test_status(options: str, now: datetime, status: str) -> None:
    (key,) = parse(trust_line(KEY, options=options)).keys
    assert key.status(now) == status


def test_local_time_without_z() -> None:
    (key,) = parse(trust_line(KEY, options='namespaces="ftmanifest",valid-before="20250101"')).keys
    local = datetime(2025, 1, 1).astimezone()
    assert key.valid_before == local.timestamp()
    assert key.status(local + timedelta(seconds=1)) == "expired-key"


def test_unsupported_lines_are_skipped_with_a_warning() -> None:
    store = parse(
        'ca@x cert-authority,namespaces="ftmanifest" ' + PUB + "\n"
        'rsa@x namespaces="ftmanifest" ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ==\n' + trust_line(KEY)
    )
    assert [k.principals for k in store.keys] == [("alice@example.org",)]
    assert "cert-authority" in store.warnings[0] and "allowed_signers:1" in store.warnings[0]
    assert "ssh-rsa keys are not supported" in store.warnings[1]


@pytest.mark.parametrize(
    "line",
    [
        "alice@x",
        f'alice@x namespaces="ftmanifest {PUB}',
        f"alice@x bogus=1 {PUB}",
        f'alice@x valid-after="2024" {PUB}',
        f'alice@x valid-after="20241301" {PUB}',
        'alice@x namespaces="ftmanifest" ssh-ed25519 AAAA!!',
        'alice@x namespaces="ftmanifest" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==',
        'alice@x namespaces="ftmanifest" ssh-ed25519 ' + PUB.split()[1][:-4],
    ],
)
def test_malformed_lines_name_the_line(line: str) -> None:
    with pytest.raises(E.MalformedTrustFileError) as info:
        parse("# header\n" + line + "\n")
    assert info.value.line == 2 and info.value.exit_code == 2


def test_only_the_repository_root_trust_file_counts(tmp_path: Path) -> None:
    """A pull request cannot add a nearer sub/.ftmanifest/allowed_signers."""
    outer = tmp_path / ".ftmanifest" / "allowed_signers"  # above the repo: never used
    outer.parent.mkdir()
    outer.write_text("")
    repo = git_init(tmp_path / "repo")
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    with pytest.raises(E.TrustFileNotFoundError) as info:
        find_trust_file(deep / "m.yaml")
    assert "--trust" in (info.value.hint or "")
    root_file = repo / ".ftmanifest" / "allowed_signers"
    root_file.parent.mkdir()
    root_file.write_text("")
    assert find_trust_file(deep / "m.yaml") == root_file
    nearer = repo / "a" / ".ftmanifest" / "allowed_signers"
    nearer.parent.mkdir()
    nearer.write_text("")
    source = choose_trust_file(deep / "m.yaml")
    assert source.path == root_file and source.how == "repository"
    assert source.describe() == f"repository root {repo}, searched from {deep}"


def test_outside_a_repository_only_the_manifest_folder_counts(tmp_path: Path) -> None:
    planted = tmp_path / ".ftmanifest" / "allowed_signers"
    planted.parent.mkdir()
    planted.write_text("")
    (tmp_path / "x").mkdir()
    with pytest.raises(E.TrustFileNotFoundError):
        find_trust_file(tmp_path / "x" / "m.yaml")
    assert find_trust_file(tmp_path / "m.yaml") == planted


def test_an_empty_dot_git_makes_no_repository_root(tmp_path: Path) -> None:
    """Only what git itself accepts as a repository moves the search's root."""
    (tmp_path / ".git").write_text("")  # planted: an empty .git file
    planted = tmp_path / ".ftmanifest" / "allowed_signers"
    planted.parent.mkdir()
    planted.write_text("")
    (tmp_path / "x").mkdir()
    with pytest.raises(E.TrustFileNotFoundError) as info:
        find_trust_file(tmp_path / "x" / "m.yaml")
    assert "not in a git work tree" in (info.value.observed or "")


def test_option_then_environment_pin_the_trust_file(tmp_path: Path) -> None:
    env = {"FTMANIFEST_TRUST_FILE": str(tmp_path / "pinned"), "PATH": "/usr/bin:/bin"}
    given = choose_trust_file(tmp_path / "m.yaml", tmp_path / "given", env)
    assert (given.path, given.describe()) == (tmp_path / "given", "given by --trust")
    pinned = choose_trust_file(tmp_path / "m.yaml", None, env)
    assert pinned.path == tmp_path / "pinned" and pinned.how == "environment"
    assert "FTMANIFEST_TRUST_FILE" in pinned.describe()


def test_load_trust_errors(tmp_path: Path) -> None:
    with pytest.raises(E.TrustFileNotFoundError):
        load_trust(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(E.MalformedTrustFileError):
        load_trust(bad)
