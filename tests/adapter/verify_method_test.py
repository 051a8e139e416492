"""verify judges the manifest's LoRA method against the pinned base's headers:
a target module the base lacks, a wrong trainable_params and an unreadable base are rows."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import git


def _edit(project: Path, old: str, new: str) -> None:
    text = project.read_text()
    assert old in text
    project.write_text(text.replace(old, new))
    git(project.parent, "commit", "-qam", "edit the method")
    lock_manifest(project)
    git(project.parent, "commit", "-qam", "lock")


def _rows(project: Path) -> dict[str, Finding]:
    report = verify_manifest(project, signature=False)
    return {f.field or "": f for f in report.findings}


def test_the_base_has_every_target_and_the_count_is_right(project: Path) -> None:
    # one Llama layer of 8x8 projections: r=16 -> 16*(8+8) per matrix, 7 matrices
    _edit(project, "  alpha: 32\n", "  alpha: 32\n  trainable_params: 1792\n")
    assert _rows(project) == {}


def test_a_target_module_the_base_lacks_is_refused(project: Path) -> None:
    _edit(project, "down_proj]", "down_proj, qkv_proj]")
    row = _rows(project)["method.target_modules"]
    assert row.rule == "adapter.target-missing" and row.observed == "qkv_proj"
    assert row.severity == "error" and row.loc == ("method", "target_modules")


def test_a_wrong_trainable_params_is_refused(project: Path) -> None:
    _edit(project, "  alpha: 32\n", "  alpha: 32\n  trainable_params: 1800\n")
    row = _rows(project)["method.trainable_params"]
    assert (row.expected, row.observed) == ("1792", "1800")


def test_an_unreadable_base_header_is_not_judged_clean(project: Path) -> None:
    weights = project.parent / "model" / "model.safetensors"
    weights.write_bytes(b"\xff" * 8 + weights.read_bytes()[8:])  # a header length past the file
    git(project.parent, "commit", "-qam", "broken weights")
    lock_manifest(project)  # pinned as they are: the digests match, the header does not parse
    git(project.parent, "commit", "-qam", "lock")
    row = _rows(project)["method"]
    assert row.rule == "adapter.method-unchecked" and row.severity == "error"


def test_verify_with_the_method_check_does_not_import_torch(project: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"rc = main(['verify', {str(project)!r}, '--no-signature'])\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RC 0 HEAVY []" in out.stdout, out.stdout + out.stderr
