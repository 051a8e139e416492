"""In a ledger that signs, only records signed by a trusted key are evidence.

One forged, unsigned preflight record used to silence verify's "preflight
missing", and a forged mark to change what ``ledger list`` (and audit's
history, which is verify's) said an attempt came to.  A ledger signs when any
record is signed or ``$FTMANIFEST_LEDGER_KEY`` is set; then a record counts
only when its signature verifies against the project's trust file, and every
other one is named in a warning with the reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger import Entry, Ledger
from ftmanifest.ledger.recordfile import KEY_ENV
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.identity import recipe_digest
from ftmanifest.signing.keys import load_private_key
from ftmanifest.verify.pipeline import ledger_summary
from tests.conftest import CLF
from tests.ledger.conftest import KeyPair, ledger_cli


@pytest.fixture
def project(tmp_path: Path, keys: tuple[KeyPair, KeyPair]) -> Path:
    """A project (no repository) trusting "me", with a manifest; its ledger is
    ``.ftmanifest/ledger`` beside the trust file."""
    mine, _ = keys
    (tmp_path / ".ftmanifest").mkdir()
    shutil.copy(mine.trust, tmp_path / ".ftmanifest" / "allowed_signers")
    shutil.copy(CLF, tmp_path / "m.yaml")
    return tmp_path / "m.yaml"


def _store(manifest: Path) -> Ledger:
    return Ledger(manifest.parent / ".ftmanifest" / "ledger")


def _planned(manifest: Path, key: KeyPair) -> Entry:
    loaded = load_manifest(manifest)
    exp = loaded.manifest.experiment
    return _store(manifest).append(
        {"status": "planned", "attempt": "a1", "experiment": {"id": exp.id, "parent": exp.parent}},
        key=load_private_key(key.key),
    )


def _preflight(manifest: Path, key: KeyPair | None) -> Entry:
    """A passing preflight record, as an attacker can write it: same experiment,
    the recipe's digest, an empty platform (matches "no backend observed")."""
    loaded = load_manifest(manifest)
    record = {
        "status": "preflight",
        "ok": True,
        "attempt": "p1",
        "experiment": {"id": loaded.manifest.experiment.id},
        "recipe_digest": recipe_digest(loaded),
    }
    return _store(manifest).append(record, key=None if key is None else load_private_key(key.key))


def _verify_ledger(manifest: Path) -> tuple[dict[str, Any] | None, list[str]]:
    warnings: list[str] = []
    history = ledger_summary(load_manifest(manifest), manifest, None, warnings, None)
    return history, warnings


def test_a_forged_unsigned_preflight_does_not_silence_preflight_missing(
    project: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, _ = keys
    _planned(project, mine)
    forged = _preflight(project, None)
    history, warnings = _verify_ledger(project)
    assert history is not None and history["preflight"] == "missing", (history, warnings)
    assert any(w.startswith("preflight missing") for w in warnings), warnings
    (why,) = [w for w in warnings if forged.short in w]
    assert "untrusted" in why and "not signed" in why and str(forged.file) in why


def test_a_preflight_signed_by_an_untrusted_key_is_no_evidence(
    project: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, stranger = keys
    _planned(project, mine)
    forged = _preflight(project, stranger)
    history, warnings = _verify_ledger(project)
    assert history is not None and history["preflight"] == "missing"
    assert any(forged.short in w and "untrusted" in w for w in warnings), warnings
    assert history["untrusted"] == [
        {"record": forged.id, "file": str(forged.file), "why": history["untrusted"][0]["why"]}
    ]


def test_a_preflight_signed_by_the_trusted_key_counts(
    project: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, _ = keys
    _preflight(project, mine)
    history, warnings = _verify_ledger(project)
    assert history is not None and history["preflight"] == "ok", warnings
    assert history["untrusted"] == [] and not any("untrusted" in w for w in warnings)


def test_an_unsigned_ledger_is_read_as_before(project: Path) -> None:
    """No record signed and no ledger key: nothing to check signatures against."""
    _preflight(project, None)
    history, warnings = _verify_ledger(project)
    assert history is not None and history["preflight"] == "ok", warnings


def test_a_configured_ledger_key_makes_unsigned_records_untrusted(
    project: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, _ = keys
    _preflight(project, None)
    monkeypatch.setenv(KEY_ENV, str(mine.key))
    history, warnings = _verify_ledger(project)
    assert history is not None and history["preflight"] == "missing", warnings


def test_ledger_list_counts_only_trusted_records(
    project: Path, keys: tuple[KeyPair, KeyPair]
) -> None:
    """A forged "abandoned" mark no longer changes what the attempt came to."""
    mine, _ = keys
    _planned(project, mine)
    forged = _store(project).append({"status": "abandoned", "attempt": "a1", "reason": "forged"})
    out = ledger_cli(_store(project).root, "list", "--format", "json", cwd=project.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert [(a["attempt"], a["status"]) for a in report["attempts"]] == [("a1", "planned")]
    assert [u["record"] for u in report["untrusted"]] == [forged.id]
    text = ledger_cli(_store(project).root, "list", cwd=project.parent)
    assert text.returncode == 0 and "abandoned" not in text.stdout.split("warning:")[0]
    assert f"warning: untrusted record {forged.short}" in text.stdout
    assert "not signed" in text.stdout
