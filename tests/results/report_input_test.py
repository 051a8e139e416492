"""``ftmanifest report`` on an audit file of the wrong shape: refused as unusable input
(exit 2) naming the field, what was expected and what was found, never an internal
error (exit 3) and never a hand-off of nothing.  Through the real console entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.results.report_test import full_data

BAD: dict[str, tuple[Any, str]] = {
    "report-not-an-object": ({"ok": True, "report": "x"}, "report"),
    "model-a-string": ({**full_data(), "model": "x"}, "model"),
    "data-a-number": ({**full_data(), "data": 5}, "data"),
    "deliverable-a-list": ({**full_data(), "deliverable": []}, "deliverable"),
    "limits-a-number": ({**full_data(), "limits": 7}, "limits"),
    "data-row-a-number": ({**full_data(), "data": [1]}, "data[0]"),
    "comparison-a-string": ({"report": {**full_data(), "comparison": "x"}}, "comparison"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_audit_of_the_wrong_shape_is_unusable_input(tmp_path: Path, name: str) -> None:
    doc, field = BAD[name]
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(doc))
    done = run_cli("report", str(audit), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert f"field: {field}" in done.stderr and "audit.json" in done.stderr, done.stderr
    assert "expected:" in done.stderr and "observed:" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing handed off


def test_control_a_whole_audit_report_is_written(tmp_path: Path) -> None:
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"ok": True, "report": full_data()}))
    done = run_cli("report", str(audit), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "README.md").is_file()
