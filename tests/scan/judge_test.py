"""One decision of which findings fail: scan, verify and audit share it."""

from __future__ import annotations

import ast
from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.scan.engine import ScanResult
from ftmanifest.scan.judge import failing, fails, judge

PACKAGE = Path(__file__).resolve().parents[2] / "ftmanifest"


def _row(kind: str = "secret", severity: str = "error", path: str = "a.txt") -> Finding:
    return Finding(kind=kind, rule=f"{kind}.x", message="m", path=path, severity=severity,
                   fingerprint=f"fp-{kind}-{severity}")  # fmt: skip


def test_info_never_fails_and_not_scanned_fails_unless_allowed() -> None:
    assert not fails(_row(severity="info"))
    assert fails(_row(severity="warning"))
    assert fails(_row("not-scanned", "warning"))
    assert not fails(_row("not-scanned", "warning"), allow_not_scanned=True)
    assert fails(_row("pii"), allow_not_scanned=True)
    rows = [_row(severity="info"), _row("pii"), _row("not-scanned", "warning")]
    assert failing(rows) == rows[1:]
    assert failing(rows, allow_not_scanned=True) == [rows[1]]


def test_a_written_baseline_accepts_and_a_baseline_suppresses(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("the scanned file")  # an entry holds its digest
    row = _row(path=str(tmp_path / "a.txt"))
    result = ScanResult(findings=[row], files=[str(tmp_path / "a.txt")])
    first = judge(result, [tmp_path])
    assert first.refused and first.baseline_written is None and first.summary["suppressed"] == 0
    base = tmp_path / "baseline.json"
    wrote = judge(result, [tmp_path], write_baseline=base)
    assert not wrote.refused and wrote.baseline_written == 1 and base.exists()
    again = judge(result, [tmp_path], baseline=base)
    assert not again.refused and again.findings == [] and again.summary["suppressed"] == 1
    other = tmp_path / "other.json"
    assert judge(result, [tmp_path], write_baseline=other, write=False).baseline_written is None
    assert not other.exists()  # a rank other than 0 writes nothing


def test_scan_verify_and_audit_call_the_one_decision() -> None:
    """The functions that judge a scan do not filter its rows by severity their own way."""
    users = {  # module -> (the function judging a scan, the name it calls)
        "cli/scan.py": ("_judge", "judge"),
        "verify/pipeline.py": ("scan_for_verify", "failing"),
        "results/audit.py": ("_gather_scan", "failing"),
    }
    for rel, (function, name) in users.items():
        tree = ast.parse((PACKAGE / rel).read_text("utf-8"))
        fn = next(
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function
        )
        calls = {ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
        assert name in calls, (rel, function)
        own = [ast.unparse(n) for n in ast.walk(fn)
               if isinstance(n, ast.Compare) and "severity" in ast.unparse(n.left)]  # fmt: skip
        assert not own, (rel, own)
