"""What happened to an experiment lives in its run records, not its signed manifest:
``experiment.status`` is refused with where it went, and ``ftmanifest
runs --mark`` records an abandoned attempt without touching the signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ftmanifest.cli import main
from ftmanifest.errors import ManifestInvalidError
from ftmanifest.ledger.runrecord import read
from ftmanifest.manifest import load_manifest
from ftmanifest.signing.sign import sign_manifest
from ftmanifest.signing.verify import verify_manifest_signature
from tests.signing.signing_helpers import repo, trust_line

EXAMPLE = Path(__file__).parents[2] / "manifests" / "docroute-lora-r16.yaml"


def _with_status(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text().replace(
        "  owner: ml-platform@example.org\n",
        "  owner: ml-platform@example.org\n  status: abandoned\n  status_reason: diverged\n",
    )
    path = tmp_path / "old.yaml"
    path.write_text(text)
    return path


def test_a_status_in_the_manifest_is_refused_with_where_it_went(tmp_path: Path) -> None:
    path = _with_status(tmp_path)
    with pytest.raises(ManifestInvalidError) as info:
        load_manifest(path)
    rows = {p.loc: p for p in info.value.findings}
    assert set(rows) == {("experiment", "status"), ("experiment", "status_reason")}
    status = rows[("experiment", "status")]
    lines = path.read_text().splitlines()
    assert status.line is not None and lines[status.line - 1].strip() == "status: abandoned"
    assert status.expected == "absent" and status.observed == "'abandoned'"
    assert status.hint and "ftmanifest runs" in status.hint and "--mark abandoned" in status.hint


def test_lint_says_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(_with_status(tmp_path))]) == 2
    out = capsys.readouterr().out
    assert "experiment.status is no longer part of the manifest" in out
    assert "unknown field" not in out  # named once, not also as an unknown key


def test_marking_an_attempt_keeps_the_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = Ed25519PrivateKey.generate()
    manifest = repo(tmp_path, [trust_line(key)])
    manifest.write_text(EXAMPLE.read_text())
    loaded = load_manifest(manifest)
    sign_manifest(manifest, loaded.canonical(), key)
    before = manifest.read_bytes()

    code = main(["runs", str(manifest), "--mark", "abandoned", "--reason", "loss diverged"])
    assert code == 0
    assert manifest.read_bytes() == before
    verify_manifest_signature(manifest, loaded.canonical())  # raises when it does not verify
    [record] = read(manifest)
    assert record["status"] == "abandoned" and record["reason"] == "loss diverged"
    assert record["manifest"]["digest"] == loaded.digest()
    assert "abandoned" in capsys.readouterr().out

    assert main(["runs", str(manifest), "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["records"]
    assert [r["status"] for r in listed] == ["abandoned"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--mark", "abandoned"],  # no reason
        ["--mark", "invalid", "--reason", "   "],  # a blank one
        ["--reason", "why"],  # a reason without a mark
    ],
)
def test_a_mark_needs_a_reason(tmp_path: Path, argv: list[str]) -> None:
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(EXAMPLE.read_text())
    assert main(["runs", str(manifest), *argv]) == 2
    assert read(manifest) == []


def test_a_mark_on_a_manifest_that_does_not_load_is_refused(tmp_path: Path) -> None:
    path = _with_status(tmp_path)
    assert main(["runs", str(path), "--mark", "invalid", "--reason", "x"]) == 2
    assert read(path) == []
