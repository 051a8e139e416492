"""lock then verify on real files; every kind of drift names its field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import ENV, git, run_cli


def _fields(path: Path, **kw: object) -> dict[str, str | None]:
    report = verify_manifest(path, signature=False, **kw)  # type: ignore[arg-type]
    return {f.field or "": f.observed for f in report.findings}


def test_lock_then_verify_is_clean(project: Path) -> None:
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: no drift" in result.stdout
    assert "signature NOT checked" in result.stderr
    assert run_cli("lint", str(project)).returncode == 0


def test_lock_keeps_comments_and_dry_run_writes_nothing(project: Path) -> None:
    text = project.read_text()
    assert "# every department, not one global average" in text
    assert "# final split: every use is counted" in text
    for section in ("model", "environment", "seeds", "data", "method", "evaluation"):
        assert f"\n\n{section}:\n" in text, f"blank line before {section} lost"
    again = lock_manifest(project, dry_run=True)
    assert not again.changed and again.diff() == ""
    project.write_text(text.replace("records: 5", "records: 7"))
    preview = lock_manifest(project, dry_run=True)
    assert "-    records: 7" in preview.diff() and "+    records: 5" in preview.diff()
    assert "records: 7" in project.read_text()


def test_one_changed_data_byte_is_drift_and_restoring_clears_it(project: Path) -> None:
    data = project.parent / "data" / "train.jsonl"
    original = data.read_bytes()
    data.write_bytes(original.replace(b"doc 3", b"doc 4"))
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 1
    assert "data[0].digest" in result.stdout and "REFUSED" in result.stdout
    data.write_bytes(original)
    assert run_cli("verify", str(project), "--no-signature", env=ENV).returncode == 0


def test_another_package_version_is_drift(project: Path) -> None:
    from importlib.metadata import version

    pinned = f"=={version('transformers')}"
    text = project.read_text()
    assert f"transformers: {pinned}" in text
    project.write_text(text.replace(f"transformers: {pinned}", "transformers: ==0.0.1"))
    assert _fields(project) == {"environment.packages.transformers": pinned}


def test_missing_package_and_env_var(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = project.read_text().replace("  packages:\n", "  packages:\n    no-such-dist: ==1.0\n")
    project.write_text(text)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM")
    fields = _fields(project)
    assert fields["environment.packages.no-such-dist"] == "absent"
    assert fields["environment.env_vars.TOKENIZERS_PARALLELISM"] == "unset"


def test_model_file_changed_missing_and_extra_weights(project: Path) -> None:
    model = project.parent / "model"
    (model / "model.safetensors").write_text("x" * 4096)
    (model / "model-00002-of-00002.safetensors").write_text("old revision")
    (model / "config.json").unlink()
    fields = _fields(project)
    assert set(fields) == {"model.files[0]", "model.files[1]", "model.files"}
    assert fields["model.files[0]"] == "absent"
    assert fields["model.files"] == "model-00002-of-00002.safetensors"


def test_code_commit_and_dirty_tree(project: Path) -> None:
    root = project.parent
    (root / "train.py").write_text("print('new')\n")
    assert "environment.code.dirty" in _fields(project)
    git(root, "add", "train.py")
    git(root, "commit", "-qm", "more code")
    fields = _fields(project)
    assert set(fields) == {"environment.code.commit"}


def test_accept_moves_a_row_to_the_report(project: Path) -> None:
    data = project.parent / "data" / "eval.jsonl"
    data.write_text('{"text": "changed", "label": "returns"}\n')
    result = run_cli(
        "verify",
        str(project),
        "--no-signature",
        "--accept",
        "data[1]",
        "--reason",
        "eval relabelled, reviewed in #42",
        env=ENV,
    )
    assert result.returncode == 0, result.stdout
    assert "accepted:  data[1].digest" in result.stdout and "reviewed in #42" in result.stdout
    bad = run_cli("verify", str(project), "--no-signature", "--accept", "data[1]", env=ENV)
    assert bad.returncode == 2 and "every --accept needs its own --reason" in bad.stderr


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_data_paths_outside_the_manifest_repository_are_refused(project: Path, how: str) -> None:
    outside = project.parent.parent / "elsewhere.jsonl"
    outside.write_text('{"text": "x"}\n')
    target = {
        "dotdot": "../elsewhere.jsonl",
        "absolute": str(outside),
        "symlink": "data/link.jsonl",
    }[how]
    if how == "symlink":
        (project.parent / "data" / "link.jsonl").symlink_to(outside)
    project.write_text(project.read_text().replace("path: data/test.jsonl", f"path: {target}"))
    fields = _fields(project)
    assert "leaves the manifest's repository" in (fields["data[2].digest"] or "")
    allowed = _fields(project, allow_outside=True)
    assert "leaves" not in (allowed.get("data[2].digest") or "")


def test_unreadable_data_is_a_row_not_a_traceback(project: Path) -> None:
    data = project.parent / "data" / "test.jsonl"
    data.unlink()
    os.mkfifo(data)
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "data[2].digest" in result.stdout


def test_not_enough_disk_is_drift(project: Path) -> None:
    project.write_text(
        project.read_text().replace(
            "    max_gpu_hours: 2.5\n", "    max_gpu_hours: 2.5\n    disk_gib: 1.0e+9\n"
        )
    )
    fields = _fields(project)
    assert "GiB free" in (fields["experiment.budget.disk_gib"] or "")


def test_unsigned_manifest_is_refused_by_default(project: Path) -> None:
    report = verify_manifest(project)
    assert not report.ok and report.findings[0].field == "signature"
    assert report.findings[0].extra["reason"] == "unsigned"


def test_signed_manifest_verifies_and_a_tampered_one_does_not(project: Path) -> None:
    root = project.parent
    assert run_cli("keygen", "-f", str(root.parent / "k"), "--no-passphrase").returncode == 0
    pub = (root.parent / "k.pub").read_text().split()[:2]
    (root / ".ftmanifest").mkdir()
    (root / ".ftmanifest" / "allowed_signers").write_text(
        f'me@example.org namespaces="ftmanifest" {" ".join(pub)}\n'
    )
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "trust me")
    lock_manifest(project)
    assert run_cli("sign", str(project), "--key", str(root.parent / "k")).returncode == 0
    ok = run_cli("verify", str(project), env=ENV)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "signature: trusted" in ok.stdout and "me@example.org" in ok.stdout
    project.write_text(project.read_text().replace("max_steps: 1200", "max_steps: 1201", 1))
    bad = run_cli("verify", str(project), env=ENV)
    assert bad.returncode == 1 and "manifest-changed" in bad.stdout
    no_accept = run_cli("verify", str(project), "--accept", "signature", "--reason", "x", env=ENV)
    assert no_accept.returncode == 2


def test_verify_does_not_import_torch(project: Path) -> None:
    code = (
        "import sys\nfrom ftmanifest.verify import verify_manifest\n"
        f"verify_manifest({str(project)!r}, signature=False)\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'peft') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
        timeout=120,
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_run_executes_only_a_clean_manifest(project: Path) -> None:
    marker = project.parent / "out" / "ran.txt"
    script = (
        "import os, pathlib, sys; p = pathlib.Path(sys.argv[1]); p.parent.mkdir(exist_ok=True); "
        "p.write_text(os.environ['FTMANIFEST_DIGEST']); sys.exit(7)"
    )
    args = ("run", str(project), "--no-signature", "--", sys.executable, "-c", script, str(marker))
    ran = run_cli(*args, env=ENV)
    assert ran.returncode == 7, ran.stdout + ran.stderr
    assert marker.read_text().startswith("sha256:")
    marker.unlink()
    (project.parent / "data" / "test.jsonl").write_text("changed\n")
    refused = run_cli(*args, env=ENV)
    assert refused.returncode == 1 and not marker.exists()
    assert "not running the command" in refused.stderr
    assert run_cli("run", str(project), env=ENV).returncode == 2


def test_policy_scan_runs_in_verify_and_a_baseline_accepts(project: Path) -> None:
    import random
    import string

    rnd = random.Random(3)
    token = "ghp_" + "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(36))
    data = project.parent / "data" / "train.jsonl"
    data.write_text(data.read_text() + f'{{"text": "token {token}", "label": "billing"}}\n')
    lock_manifest(project)
    report = verify_manifest(project, signature=False)
    [row] = report.findings
    assert row.kind == "secret" and row.rule == "secret.github-pat" and row.line == 6
    assert token not in str(report.to_dict())
    assert verify_manifest(project, signature=False, scan=False).ok
    baseline = project.parent / "scan-baseline.json"
    written = run_cli("scan", str(data), "--write-baseline", str(baseline))
    assert written.returncode == 0, written.stdout + written.stderr
    project.write_text(
        project.read_text().replace(
            "    on: [verify, audit]\n",
            "    on: [verify, audit]\n    baseline: scan-baseline.json\n",
        )
    )
    assert verify_manifest(project, signature=False).ok


def test_lock_rewrites_json_and_refuses_toml(project: Path) -> None:
    import json

    from ftmanifest.errors import InputError
    from ftmanifest.manifest import load_manifest

    data = load_manifest(project).document.data
    right = data["data"][0]["digest"]
    data["data"][0]["digest"] = "sha256:" + "0" * 64
    git(project.parent, "rm", "-qf", project.name)  # exp.json will be the only manifest
    git(project.parent, "commit", "-qm", "move to JSON")
    as_json = project.with_suffix(".json")
    as_json.write_text(json.dumps(data))
    result = lock_manifest(as_json)
    assert result.changed and json.loads(as_json.read_text())["data"][0]["digest"] == right
    assert verify_manifest(as_json, signature=False).ok
    as_toml = project.with_suffix(".toml")
    as_toml.write_text('ftmanifest = 1\n[experiment]\nid = "x"\n[model]\npath = "model"\n')
    with pytest.raises(InputError, match="not TOML"):
        lock_manifest(as_toml)


def test_lock_fills_the_cache_and_a_changed_file_is_read_once(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After lock, verify reads nothing; a changed file is read once, hash and count together."""
    from ftmanifest.hashing import files

    reads: list[Path] = []
    real = files._hash_one  # where _hash_all looks it up

    def spy(path: Path, *args: object) -> object:
        reads.append(path)
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "_hash_one", spy)
    assert verify_manifest(project, signature=False, scan=False).ok
    assert reads == []  # lock waited out the racy window, so everything was cached
    (project.parent / "data" / "eval.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    fields = _fields(project, scan=False)
    assert reads == [project.parent / "data" / "eval.jsonl"]
    assert fields["data[1].records"] == "2"


def test_lock_on_a_missing_manifest_is_a_clean_error(tmp_path: Path) -> None:
    result = run_cli("lock", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2 and "manifest not found" in result.stderr
    assert "internal error" not in result.stderr
