"""The issue's whole path: a clean run audited through the command line writes the
handoff report (0600) from the audit and the comparison made again, and the page
renders in headless Chromium with the comparison chart and no console error."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest

from ftmanifest.cli import main
from tests.results.conftest import AuditRun
from tests.results.report_browser_test import _browse, _chromium, _console_errors


def test_a_ready_run_writes_the_report_a_browser_renders(
    audit_run: AuditRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = audit_run
    limits = "only five departments; English tickets only"
    argv = ["audit", str(r.run), "--manifest", str(r.manifest), "--no-signature"]
    assert main([*argv, "--limits", limits]) == 0
    out = capsys.readouterr().out
    html = r.run / "handoff" / "handoff.html"
    assert f"report:    {html}" in out and "OK: ready for handoff" in out
    for name in ("handoff.html", "handoff.md", "handoff.json"):
        assert stat.S_IMODE((r.run / "handoff" / name).stat().st_mode) == 0o600
    page = html.read_text()
    assert limits in page and 'class="tolerance"' in page and "billing" in page

    _chromium()  # skips, naming .ci/run, where Chromium cannot be had
    with tempfile.TemporaryDirectory(prefix="ftm-chromium-") as profile:
        dom = _browse(html, "--dump-dom", profile=Path(profile))
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console_errors(dom.stderr) == []
    assert '<svg class="chart"' in dom.stdout and "</html>" in dom.stdout


def test_a_refused_run_still_writes_the_report_saying_so(
    audit_run: AuditRun, capsys: pytest.CaptureFixture[str]
) -> None:
    r = audit_run
    (r.run / "logs" / "train.log").chmod(0o644)
    assert main(["audit", str(r.run), "--manifest", str(r.manifest), "--no-signature"]) == 1
    assert "REFUSED" in capsys.readouterr().out
    page = (r.run / "handoff" / "handoff.html").read_text()
    assert "REFUSED" in page and "audit.permissions" in page
