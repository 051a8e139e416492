"""A variant's parent found beside it or in the ledger, judged by lint and verify alike."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest import lint_paths
from ftmanifest.cli import main
from ftmanifest.ledger import open_ledger
from ftmanifest.manifest import load_manifest
from ftmanifest.verify import variant_check, verify_manifest
from tests.conftest import CLF, run_cli

R16 = Path("manifests/docroute-lora-r16.yaml")
R32 = Path("manifests/docroute-lora-r32.yaml")


@pytest.fixture(autouse=True)
def _ledger_beside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FTMANIFEST_LEDGER", raising=False)  # tmp_path/.ftmanifest/ledger


def _variant(folder: Path, edit: Any = None) -> Path:
    doc = load_manifest(R32).canonical()
    if edit is not None:
        edit(doc)
    path = folder / "variant.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def _two_undeclared(doc: dict[str, Any]) -> None:
    doc["seeds"]["python"] = 7
    doc["data"][0]["digest"] = "sha256:" + "1" * 64


def _parent(folder: Path, edit: Any = None, name: str = "parent.json") -> Path:
    doc = load_manifest(R16).canonical()
    if edit is not None:
        edit(doc)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def _plan(path: Path) -> None:
    assert main(["ledger", "plan", str(path)]) == 0


def _verify_rows(path: Path) -> list[tuple[str | None, str]]:
    report = verify_manifest(path, signature=False, scan=False)
    return sorted((f.field, f.rule) for f in report.findings if f.kind == "variant")


def _lint_rows(path: Path) -> list[tuple[str | None, str, str]]:
    findings, unusable = lint_paths([str(path)])
    assert unusable == 0
    return sorted((f.field, f.rule, f.severity) for f in findings)


def test_two_undeclared_changes_are_refused_by_lint_and_verify(tmp_path: Path) -> None:
    shutil.copy(R16, tmp_path / R16.name)
    path = _variant(tmp_path, _two_undeclared)
    fields = ["data[train].digest", "seeds.python"]
    assert _verify_rows(path) == [(f, "variant.undeclared-change") for f in fields]
    assert _lint_rows(path) == [(f, "FTM080", "error") for f in fields]
    result = run_cli("lint", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    for field in fields:
        assert f"FTM080 {field} differs from the parent (docroute-lora-r16)" in result.stdout
    line = next(ln for ln in result.stdout.splitlines() if "seeds.python" in ln)
    assert line.startswith(f"{path}:") and int(line[len(str(path)) + 1 :].split(":")[0]) > 1


def test_the_shipped_variant_passes_lint_and_its_parent_is_beside_it() -> None:
    assert lint_paths([str(R32)]) == ([], 0)


def test_parent_found_only_in_the_ledger_is_judged(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    _plan(parent)
    parent.unlink()
    path = _variant(tmp_path, _two_undeclared)
    fields = ["data[train].digest", "seeds.python"]
    assert _verify_rows(path) == [(f, "variant.undeclared-change") for f in fields]
    assert _lint_rows(path) == [(f, "FTM080", "error") for f in fields]
    fair = _variant(tmp_path)
    assert variant_check(load_manifest(fair), fair) == []
    assert lint_paths([str(fair)]) == ([], 0)


def test_the_newest_body_in_the_ledger_is_used_and_a_file_beside_wins(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    _plan(parent)
    _parent(tmp_path, lambda doc: doc["seeds"].update(python=7))  # as later planned
    _plan(parent)
    path = _variant(tmp_path, lambda doc: doc["seeds"].update(python=7))
    loaded = load_manifest(path)
    assert variant_check(loaded, path) == []  # the file beside: seeds.python 7
    parent.unlink()
    assert variant_check(loaded, path) == []  # the ledger's newest body: 7 too
    _parent(tmp_path, name="first.json")  # the first version back beside it
    (row,) = variant_check(loaded, path)
    assert (row.field, row.rule) == ("seeds.python", "variant.undeclared-change")


def _record(folder: Path, body: dict[str, Any], digest: str) -> None:
    open_ledger(folder / "parent.json").append({
        "status": "planned", "attempt": "0123456789ab",
        "experiment": {"id": "docroute-lora-r16", "parent": None},
        "manifest": {"path": "parent.json", "digest": digest, "body": body},
    })  # fmt: skip


def test_a_tampered_body_in_the_ledger_is_not_used(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    _plan(parent)
    parent.unlink()
    path = _variant(tmp_path)
    loaded = load_manifest(path)
    assert variant_check(loaded, path) == []  # the planned body judges it
    good = load_manifest(R16)
    body = good.canonical()
    body["seeds"]["python"] = 99  # edited after its digest was taken
    _record(tmp_path, body, good.digest())
    (row,) = variant_check(loaded, path)
    assert row.rule == "variant.parent-not-found" and row.severity == "error"
    assert "does not hash to its digest" in (row.observed or "")
    assert "ledger" in (row.expected or "") and "ledger" in (row.hint or "")
    (warned,) = lint_paths([str(path)])[0]
    assert (warned.rule, warned.severity) == ("FTM081", "warning")
    assert "does not hash to its digest" in (warned.observed or "")


def test_a_body_that_is_not_a_manifest_is_not_used(tmp_path: Path) -> None:
    from ftmanifest.manifest.canonical import canonical_json, sha256_digest

    body = load_manifest(R16).canonical()
    body["seeds"]["python"] = "seven"
    _record(tmp_path, body, sha256_digest(canonical_json(body)))
    path = _variant(tmp_path)
    (row,) = variant_check(load_manifest(path), path)
    assert row.rule == "variant.parent-not-found"
    assert "not a valid manifest" in (row.observed or "")


def test_lint_warns_and_passes_when_the_parent_is_nowhere(tmp_path: Path) -> None:
    path = _variant(tmp_path)
    (warned,) = lint_paths([str(path)])[0]
    assert (warned.rule, warned.severity) == ("FTM081", "warning")
    assert warned.field == "experiment.parent"
    assert "no ledger at" in (warned.observed or "")
    result = run_cli("lint", "--format", "json", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["findings"]
    assert row["severity"] == "warning" and row["rule"] == "FTM081"
    text = run_cli("lint", str(path))
    assert text.returncode == 0 and "1 warning(s)" in text.stderr
    # verify keeps it an error: what verify passes must have been judged
    (row2,) = variant_check(load_manifest(path), path)
    assert row2.severity == "error" and "beside it or in the ledger" in row2.message


def test_an_ambiguous_parent_beside_it_is_not_resolved_from_the_ledger(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    _plan(parent)
    shutil.copy(parent, tmp_path / "copy.json")
    path = _variant(tmp_path)
    (row,) = variant_check(load_manifest(path), path)
    assert row.observed == "2 manifests"


def test_lint_of_a_non_variant_reads_no_ledger_and_builds_no_model() -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"main(['lint', {str(CLF)!r}])\n"
        "print('LOADED', sorted(m for m in ('ftmanifest.ledger', 'ftmanifest.manifest.model',"
        " 'pydantic', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_lint_of_a_variant_imports_no_framework() -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"rc = main(['lint', {str(R32)!r}])\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print('RC', rc, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "RC 0 []" in out.stdout, out.stdout + out.stderr


def test_a_broken_parent_file_beside_it_is_reported_not_replaced(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    _plan(parent)
    _parent(tmp_path, lambda doc: doc["seeds"].update(python="seven"))
    path = _variant(tmp_path)
    (row,) = variant_check(load_manifest(path), path)
    assert row.rule == "variant.parent-not-found"
    assert row.message.startswith("an invalid manifest with experiment.id 'docroute-lora-r16'")
    assert "parent.json has the id but is not a valid manifest" in (row.observed or "")
