"""``ftmanifest audit``: the handoff gate on a complete tiny run folder."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ftmanifest.results.audit import AUDIT_CHECKS, audit
from tests.conftest import ENV, git, run_cli
from tests.results.conftest import GHP, AuditRun

PII = '{"text": "call ana.silva@uni-lisboa.pt or +49 30 1234 5678", "label": "billing"}\n'


def _cli(r: AuditRun, *more: str) -> tuple[int, str]:
    env = {**ENV, "COLUMNS": "250"}
    out = run_cli("audit", str(r.run), "--manifest", str(r.manifest), *more, env=env)
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stdout


def test_clean_run_is_ready_and_the_report_holds_the_handoff(audit_run: AuditRun) -> None:
    report = audit(audit_run.run, audit_run.manifest, signature=False)
    assert report.ok, [f.to_dict() for f in report.findings]
    d = report.to_dict()
    assert d["manifest"]["digest"].startswith("sha256:") and d["signature"]["checked"] is False
    files = {f["path"] for f in d["deliverable"]["files"]}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files
    assert d["deliverable"]["binding"]["ok"] and d["deliverable"]["kind"] == "adapter"
    assert d["model"]["path"] == "model" and d["model"]["license"] == "apache-2.0"
    assert d["environment"]["python"]
    assert [e["name"] for e in d["data"]] == ["train", "eval", "test"]
    assert all(e["digest"].startswith("sha256:") and e["license"] for e in d["data"])
    assert d["comparison"]["digest"].startswith("sha256:") and d["perms_changes"] == []
    json.dumps(d)  # plain data only
    code, text = _cli(audit_run, "--no-signature")
    assert code == 0 and text.endswith("OK: ready for handoff\n"), text


def test_token_loose_checkpoint_and_undeclared_pii_refuse_then_fix(audit_run: AuditRun) -> None:
    r = audit_run
    (r.run / "logs" / "train.log").write_text(f"step 1 loss 0.5\nHF push with {GHP}\n")
    ckpt = r.run / "checkpoints" / "step-2"
    ckpt.chmod(0o755)
    (ckpt / "adapter_model.safetensors").chmod(0o644)
    train = r.manifest.parent / "data" / "train.jsonl"
    clean = train.read_text()
    train.write_text(clean + PII)
    r.relock("personal data slipped in")
    train.chmod(0o640)

    report = audit(r.run, r.manifest, signature=False)
    rules = {f.rule for f in report.findings if f.severity == "error"}
    assert "secret.github-pat" in rules
    assert "audit.undeclared-personal-data" in rules and "audit.permissions" in rules
    [pii] = [f for f in report.findings if f.rule == "audit.undeclared-personal-data"]
    assert pii.loc == ("data", 0, "contains_personal_data") and pii.kind == "audit"
    loose = {Path(f.path).name: f for f in report.findings if f.rule == "audit.permissions"}
    assert set(loose) == {"step-2", "adapter_model.safetensors"}
    assert loose["adapter_model.safetensors"].observed == "0644"
    assert "world-readable" in loose["adapter_model.safetensors"].message
    assert GHP not in json.dumps(report.to_dict())
    code, text = _cli(r, "--no-signature")
    assert code == 1 and "REFUSED" in text
    assert "secret.github-pat" in text and "undeclared-personal-data" in text, text
    assert "audit.permissions" in text

    code, text = _cli(r, "--no-signature", "--fix-perms", "--format", "json")
    body = json.loads(text)
    changes = {Path(c["path"]).name: (c["old"], c["new"]) for c in body["perms_changes"]}
    assert changes == {"step-2": ("0755", "0750"), "adapter_model.safetensors": ("0644", "0640")}
    assert stat.S_IMODE((ckpt / "adapter_model.safetensors").stat().st_mode) == 0o640
    assert code == 1 and not any(f["rule"] == "audit.permissions" for f in body["findings"])

    (r.run / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    train.write_text(clean)
    r.relock("personal data removed")
    train.chmod(0o640)
    code, text = _cli(r, "--no-signature")
    assert code == 0, text


def test_missing_deliverable_rights_and_comparison_are_rows(audit_run: AuditRun) -> None:
    import shutil

    r = audit_run
    shutil.rmtree(r.adapter)
    (r.run / "comparison.json").write_text('{"ok": false}')
    text = r.manifest.read_text()
    r.manifest.write_text(
        text.replace("  terms_accepted: true\n", "  terms_accepted: false\n")
        .replace("    license: internal\n", "", 1)
        .replace("  backup_recipients:\n    - age1", "  old_recipients:\n    - age1", 1)
        .split("  old_recipients:")[0]
    )
    git(r.manifest.parent, "commit", "-qam", "rights")
    report = audit(r.run, r.manifest, signature=False, only=["deliverable", "rights", "comparison"])
    rows = {f.rule: f for f in report.findings}
    assert set(rows) == {
        "audit.deliverable-missing",
        "audit.terms-not-accepted",
        "audit.data-license",
        "audit.backup-recipients-missing",
        "audit.comparison-unreadable",  # a verdict in a file is not a comparison
    }
    assert rows["audit.data-license"].loc == ("data", 1, "license")
    assert not report.ok


def test_signed_manifest_is_trusted(audit_run: AuditRun) -> None:
    r = audit_run
    root = r.manifest.parent
    assert run_cli("keygen", "-f", str(root.parent / "k"), "--no-passphrase").returncode == 0
    pub = (root.parent / "k.pub").read_text().split()[:2]
    signers = root / ".ftmanifest" / "allowed_signers"
    line = f'me@example.org namespaces="ftmanifest" {" ".join(pub)}\n'
    signers.write_text(signers.read_text() + line)
    git(root, "commit", "-qam", "trust me")
    r.relock("signers")
    assert run_cli("sign", str(r.manifest), "--key", str(root.parent / "k")).returncode == 0
    report = audit(r.run, r.manifest)
    assert report.ok and report.to_dict()["signature"]["ok"], report.findings
    code, text = _cli(r)
    assert code == 0 and "signature: trusted (me@example.org" in text, text
    r.manifest.write_text(r.manifest.read_text().replace("max_steps: 1200", "max_steps: 1201"))
    [row] = audit(r.run, r.manifest, only=["signature"]).findings
    assert row.field == "signature" and row.extra["check"] == "signature"


def test_registry_names_every_check() -> None:
    assert list(AUDIT_CHECKS) == [
        "signature", "drift", "deliverable", "scan", "personal-data", "permissions",
        "rights", "split", "comparison", "ledger",
    ]  # fmt: skip


def test_missing_run_folder_is_exit_2(project: Path, tmp_path: Path) -> None:
    out = run_cli("audit", str(tmp_path / "nope"), "--manifest", str(project), env=ENV)
    assert out.returncode == 2 and "run folder" in out.stderr


@pytest.mark.parametrize("option", ["--fix-perms", "--no-signature", "--format", "--manifest"])
def test_help_names_every_option(option: str) -> None:
    assert option in run_cli("audit", "--help").stdout


def test_audit_does_not_import_torch(audit_run: AuditRun) -> None:
    import os
    import subprocess
    import sys

    code = (
        "import sys\nfrom ftmanifest.results.audit import audit\n"
        f"audit({str(audit_run.run)!r}, {str(audit_run.manifest)!r}, signature=False)\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'peft') if m in sys.modules])\n"
    )
    env = {**os.environ, **ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def _compare_rules(r: AuditRun) -> set[str]:
    report = audit(r.run, r.manifest, signature=False, only=["comparison"])
    return {f.rule for f in report.findings}


def test_a_candidate_that_drops_a_category_is_refused_when_audit_compares_again(
    audit_run: AuditRun,
) -> None:
    from ftmanifest.cli import main
    from tests.results.conftest import write_predictions

    r = audit_run
    assert _compare_rules(r) == set()
    results = r.run / "results"
    cats = ["billing", "shipping", "returns", "technical", "account"]
    rows = [(f"{c}-{i}", c, "account" if c == "billing" and i < 2 else c)
            for c in cats for i in range(4)]  # fmt: skip
    write_predictions(results / "candidate.jsonl", rows)
    assert main(["score", "--manifest", str(r.manifest), "--split", "eval", "--predictions",
                 str(results / "candidate.jsonl"), "--adapter", str(r.adapter),
                 "--out", str(results / "candidate.results.json")]) == 0  # fmt: skip
    assert main(["compare", str(r.manifest), "--resamples", "0", "--baseline",
                 str(results / "baseline.results.json"), "--candidate",
                 str(results / "candidate.results.json"), "--out",
                 str(r.run / "comparison.json")]) == 1  # fmt: skip
    assert "guard.per-category-drop" in _compare_rules(r)


def test_results_changed_after_the_comparison_are_stale(audit_run: AuditRun) -> None:
    r = audit_run
    cand = r.run / "results" / "candidate.results.json"
    cand.write_text(cand.read_text().replace('"accuracy": 1.0', '"accuracy": 1.00'))
    assert "audit.comparison-stale" in _compare_rules(r)


def test_a_comparison_under_another_manifest_is_refused(audit_run: AuditRun) -> None:
    r = audit_run
    r.manifest.write_text(r.manifest.read_text().replace("max_drop: 0.02", "max_drop: 0.03"))
    git(r.manifest.parent, "commit", "-qam", "looser guard after the fact")
    assert "audit.comparison-other-manifest" in _compare_rules(r)


def test_the_caches_the_run_used_are_judged_too(audit_run: AuditRun) -> None:
    import os

    from ftmanifest.statcache import cache_dir

    r = audit_run
    weights = r.manifest.parent / "model" / "model.safetensors"
    weights.chmod(0o644)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    leak = cache / "stray.db"
    leak.write_text("fingerprints")
    leak.chmod(0o666)
    report = audit(r.run, r.manifest, signature=False, only=["permissions"])
    paths = {os.path.realpath(f.path) for f in report.findings if f.rule == "audit.permissions"}
    assert os.path.realpath(weights) in paths and os.path.realpath(leak) in paths
    fixed = audit(r.run, r.manifest, signature=False, only=["permissions"], fix_perms=True)
    assert fixed.ok and weights.stat().st_mode & 0o777 == 0o640
    assert leak.stat().st_mode & 0o777 == 0o640


def test_undeclared_personal_data_is_found_with_a_relative_manifest_path(
    audit_run: AuditRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = audit_run
    train = r.manifest.parent / "data" / "train.jsonl"
    train.write_text(train.read_text() + PII)
    r.relock("personal data")
    monkeypatch.chdir(r.manifest.parent.parent)
    relative = Path(r.manifest.parent.name) / r.manifest.name
    report = audit(r.run, relative, signature=False, only=["personal-data"])
    assert [f.rule for f in report.findings] == ["audit.undeclared-personal-data"]


def test_a_comparison_scored_with_another_adapter_is_refused(audit_run: AuditRun) -> None:
    r = audit_run
    (r.adapter / "notes.txt").write_text("edited after scoring\n")  # another deliverable tree
    assert "audit.comparison-not-of-deliverable" in _compare_rules(r)
