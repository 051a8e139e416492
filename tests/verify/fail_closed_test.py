"""Paths on which verify once said OK although what would train differs.

Each test reproduces one false OK; it failed before the fix it names.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest import lint_paths
from ftmanifest.errors import ManifestInvalidError, UsageError
from ftmanifest.ledger.runrecord import read as read_records
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.model import Manifest
from ftmanifest.verify import apply_acceptances, verify_manifest
from ftmanifest.verify.drift import compare
from ftmanifest.verify.drift_env import exact_pin, same_version
from ftmanifest.verify.observe import observe_data
from tests.conftest import CLF, ENV, git, run_cli, within
from tests.verify.drift_test import _observed


def _fields(path: Path, **kw: Any) -> dict[str, str | None]:
    report = verify_manifest(path, signature=False, **kw)
    return {f.field or "": f.observed for f in report.findings}


def _rules(path: Path, **kw: Any) -> list[str]:
    return [f.rule for f in verify_manifest(path, signature=False, **kw).findings]


# --- 1. two data entries with one name ---------------------------------------


def _duplicate_train(project: Path) -> None:
    text = project.read_text()
    text = text.replace("  - name: eval\n", "  - name: train\n", 1)
    project.write_text(text)


def test_duplicate_data_names_are_refused_naming_both_lines(project: Path) -> None:
    _duplicate_train(project)
    lines = project.read_text().splitlines()
    first, second = (i + 1 for i, t in enumerate(lines) if t.strip() == "- name: train")
    findings, unusable = lint_paths([str(project)])
    assert unusable == 1
    (row,) = [f for f in findings if "used twice" in f.message]
    assert row.line == second and f"line {first}" in row.message
    assert row.field == "data[1].name" and "data[0].name" in (row.observed or "")
    with pytest.raises(ManifestInvalidError):
        load_manifest(project)
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 2 and "used twice" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_observations_are_per_entry_even_when_names_repeat(project: Path) -> None:
    """A Manifest built in code skips the loader's check: nothing may key by name."""
    data = load_manifest(project).manifest.model_dump(mode="json", exclude_unset=True)
    data["data"][1]["name"] = data["data"][0]["name"]
    manifest = Manifest.model_validate(data)
    states = observe_data(manifest, project.parent, use_cache=False, allow_outside=False)
    assert [s.path for s in states] == [e.path for e in manifest.data]
    assert states[0].digest != states[1].digest
    (project.parent / manifest.data[0].path).write_text('{"text": "edited"}\n')
    seen = observe_data(manifest, project.parent, use_cache=False, allow_outside=False)
    assert seen[0].digest != manifest.data[0].digest


# --- 2. special files in pinned folders --------------------------------------


def _data_folder_manifest(project: Path) -> Path:
    shards = project.parent / "data" / "shards"
    shards.mkdir()
    for i in range(2):
        (shards / f"part{i}.jsonl").write_text(f'{{"text": "{i}"}}\n')
    text = project.read_text().replace("path: data/train.jsonl", "path: data/shards", 1)
    project.write_text(text)
    from ftmanifest.verify.lock import lock_manifest

    lock_manifest(project)
    assert verify_manifest(project, signature=False).ok
    return shards


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_special_file_in_a_data_folder_is_drift(project: Path, kind: str) -> None:
    shards = _data_folder_manifest(project)
    target = shards / "part9.jsonl"
    if kind == "fifo":
        os.mkfifo(target)
        report = within(20, lambda: verify_manifest(project, signature=False))
    else:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(target))
            report = within(20, lambda: verify_manifest(project, signature=False))
    assert not report.ok
    (row,) = [f for f in report.findings if f.field == "data[0].digest"]
    assert "part9.jsonl" in (row.observed or "") + row.message


def test_fifo_in_the_model_folder_is_drift(project: Path) -> None:
    os.mkfifo(project.parent / "model" / "tokenizer.json")
    report = within(20, lambda: verify_manifest(project, signature=False))
    assert not report.ok
    assert any(
        f.rule == "drift.model-extra" and f.path == "tokenizer.json" for f in report.findings
    )


def test_an_extra_code_file_in_the_model_folder_is_its_own_row(project: Path) -> None:
    """Accepting a changed weight must not also wave through new remote code."""
    model = project.parent / "model"
    (model / "model.safetensors").write_text("x" * 4096)
    (model / "modeling_evil.py").write_text("import os\n")
    report = verify_manifest(project, signature=False, accept={"model.files[1]": "retrained"})
    assert not report.ok
    assert [(f.rule, f.path) for f in report.findings] == [
        ("drift.model-extra", "modeling_evil.py")
    ]


# --- 3. package pins that are not exact --------------------------------------


@pytest.mark.parametrize("spec", [">=9", "!=0.0.1", "~=2.14", "*", "2.13.0", "==2.*", ">=1,<3"])
def test_a_pin_that_is_not_exact_is_refused(spec: str) -> None:
    m = load_manifest(CLF).manifest
    seen = _observed(m)
    packages = dict(m.environment.packages)
    name = next(iter(packages))
    packages[name] = spec
    m = m.model_copy(
        update={"environment": m.environment.model_copy(update={"packages": packages})}
    )
    rows = [f for f in compare(m, seen) if f.field == f"environment.packages.{name}"]
    assert [f.rule for f in rows] == ["drift.package-unpinned"]
    assert spec in (rows[0].observed or "")


@pytest.mark.parametrize(
    ("spec", "installed", "same"),
    [
        ("==2.13.0+cpu", "2.13.0+cpu", True),
        ("==2.13.0", "2.13.0+cpu", False),  # a local label is part of the version
        ("==2.13.0+cpu", "2.13.0", False),
        ("==2.13", "2.13.0", True),  # PEP 440: trailing zeros are the same release
        ("==1.0.0rc1", "1.0.0-rc.1", True),  # normalised spelling
        ("==1.0.post1", "1.0", False),
        ("===1.0-foo", "1.0-foo", True),
        ("===1.0", "1.0.0", False),
    ],
)
def test_exact_pins_compare_by_pep440(spec: str, installed: str, same: bool) -> None:
    pin = exact_pin(spec)
    assert pin is not None
    assert same_version(*pin, installed) is same


def test_verify_refuses_an_unpinned_package_end_to_end(project: Path) -> None:
    text = project.read_text()
    lines = [t for t in text.splitlines() if t.strip().startswith("torch:")]
    assert lines
    project.write_text(text.replace(lines[0], "    torch: '>=1'", 1))
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "environment.packages.torch" in result.stdout and "'>=1'" in result.stdout
    accepted = run_cli(
        "verify",
        str(project),
        "--no-signature",
        "--accept",
        "environment.packages.torch",
        "--reason",
        "trust me",
        env=ENV,
    )
    assert accepted.returncode == 1 and "cannot be accepted" in accepted.stderr


# --- 5. --accept is one row, with a reason, recorded --------------------------


@pytest.mark.parametrize("section", ["data", "environment", "model.files", "environment.packages"])
def test_accepting_a_section_is_a_usage_error(project: Path, section: str) -> None:
    (project.parent / "data" / "eval.jsonl").write_text("changed\n")
    result = run_cli(
        "verify", str(project), "--no-signature", "--accept", section, "--reason", "x", env=ENV
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "names a section" in result.stderr


def test_one_data_entry_may_be_accepted_as_a_whole(project: Path) -> None:
    (project.parent / "data" / "eval.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    report = verify_manifest(project, signature=False, accept={"data[1]": "relabelled, #42"})
    assert report.ok
    assert sorted(a.finding.field or "" for a in report.accepted) == [
        "data[1].digest",
        "data[1].records",
    ]


@pytest.mark.parametrize("reason", ["", "   ", "\t\n"])
def test_a_blank_reason_is_refused(reason: str) -> None:
    with pytest.raises(UsageError, match="blank"):
        apply_acceptances([], {"data[0].digest": reason})


def test_accepting_a_missing_snapshot_still_checks_every_weight(
    hub: tuple[Path, dict[str, str]],
) -> None:
    from ftmanifest.verify.lock import lock_manifest

    manifest, commits = hub
    lock_manifest(manifest)
    manifest.write_text(manifest.read_text().replace(commits["v2"], "f" * 40))
    report = verify_manifest(manifest, signature=False, accept={"model.revision": "moved"})
    assert not report.ok
    assert {f.rule for f in report.findings} == {"drift.model-unchecked"}
    assert len(report.findings) == len(load_manifest(manifest).manifest.model.files)


def test_cli_acceptances_are_appended_to_the_run_record(project: Path) -> None:
    (project.parent / "data" / "eval.jsonl").write_text("changed\nand longer\n")
    args = ["--no-signature", "--accept", "data[1].digest", "--reason", "reviewed in #42"]
    args += ["--accept", "data[1].records", "--reason", "same review"]
    first = run_cli("verify", str(project), *args, env=ENV)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_cli("verify", str(project), *args, env=ENV)
    assert second.returncode == 0
    records = read_records(project)
    assert len(records) == 2
    assert records[0]["status"] == "verified" and records[0]["signature_checked"] is False
    assert [(a["field"], a["reason"]) for a in records[0]["accepted"]] == [
        ("data[1].digest", "reviewed in #42"),
        ("data[1].records", "same review"),
    ]
    assert records[0]["manifest"]["digest"] == load_manifest(project).digest()
    # the record beside the manifest does not make the training code dirty
    assert run_cli("verify", str(project), "--no-signature", *args[1:], env=ENV).returncode == 0


def test_the_run_record_survives_a_torn_write(project: Path, tmp_path: Path) -> None:
    from ftmanifest.ledger import Ledger
    from ftmanifest.ledger.runrecord import append, records_path

    folder = records_path(project)
    folder.mkdir(parents=True)
    (folder / ".20261201T000000.000000Z-x.json.tmp").write_text('{"status": "st')  # a crash
    append(project, {"status": "completed", "manifest": {"path": "exp.yaml"}})
    assert [r["status"] for r in read_records(project)] == ["completed"]
    _, problems = Ledger(folder).check()
    assert [p.rule for p in problems] == ["ledger.leftover"]


# --- 6. the stat cache's blind spot, paid for on purpose ----------------------


def _flip_keeping_stat(path: Path) -> None:
    """Change a byte and put the stat back as far as user space can (not ctime)."""
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_rehash_always_reads_every_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``security.rehash: always`` no digest comes from the stat cache."""
    from ftmanifest.statcache import StatCache

    verify_manifest(project, signature=False)  # fills the cache
    text = project.read_text()
    assert "security:" in text
    project.write_text(text.replace("security:\n", "security:\n  rehash: always\n", 1))
    looked_up: list[int] = []
    real = StatCache.lookup_many

    def spy(self: Any, items: Any, algo: str) -> dict[str, str]:
        looked_up.append(len(items))
        return real(self, items, algo)

    monkeypatch.setattr(StatCache, "lookup_many", spy)
    assert verify_manifest(project, signature=False).ok
    assert looked_up == []
    project.write_text(text)
    assert verify_manifest(project, signature=False).ok
    assert looked_up  # the default trusts the cache


def test_json_report_of_an_unpinned_manifest_names_the_rule(project: Path) -> None:
    text = project.read_text()
    line = next(t for t in text.splitlines() if t.strip().startswith("torch:"))
    project.write_text(text.replace(line, "    torch: '*'", 1))
    out = run_cli("verify", str(project), "--no-signature", "--format", "json", env=ENV)
    rows = json.loads(out.stdout)["findings"]
    assert any(r["rule"] == "drift.package-unpinned" for r in rows)


# --- committing the locked manifest -------------------------------------------


def test_committing_the_locked_manifest_keeps_verify_clean(project: Path) -> None:
    root = project.parent
    git(root, "add", "exp.yaml")
    git(root, "commit", "-qm", "lock the manifest")
    report = verify_manifest(project, signature=False)
    assert report.ok, report.findings
    from ftmanifest.ledger.runrecord import append

    append(project, {"status": "planned"})  # an untracked .ftmanifest/ledger is not code
    assert verify_manifest(project, signature=False).ok
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "run records")
    assert verify_manifest(project, signature=False).ok
    (root / ".ftmanifest" / "notes.txt").write_text("not a ledger record\n")
    assert not verify_manifest(project, signature=False).ok  # beside it: still code


def test_a_later_commit_that_changes_code_is_drift(project: Path) -> None:
    root = project.parent
    (root / "scripts" / "train_extra.py").write_text("print('new')\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "manifest and new code")
    rows = [f for f in verify_manifest(project, signature=False).findings]
    assert [f.field for f in rows] == ["environment.code.commit"]
    assert "scripts/train_extra.py" in (rows[0].observed or "")


def test_a_commit_that_is_not_a_descendant_is_drift(project: Path) -> None:
    root = project.parent
    git(root, "checkout", "-q", "--orphan", "other")
    git(root, "commit", "-qm", "unrelated history")
    rows = verify_manifest(project, signature=False).findings
    assert [f.field for f in rows] == ["environment.code.commit"]
    assert "not a descendant" in (rows[0].observed or "")


# --- an empty pin is not a pass -----------------------------------------------


def test_a_data_entry_without_a_digest_is_refused(project: Path) -> None:
    text = project.read_text()
    data_digest = load_manifest(project).manifest.data[2].digest
    assert data_digest and text.count(data_digest) == 1
    project.write_text("\n".join(t for t in text.splitlines() if data_digest not in t) + "\n")
    report = verify_manifest(project, signature=False, accept={"data[2]": "trust me"})
    assert [(f.field, f.rule) for f in report.findings] == [("data[2].digest", "drift.unpinned")]


def test_a_hub_model_on_a_branch_is_refused(hub: tuple[Path, dict[str, str]]) -> None:
    manifest, _ = hub
    rows = verify_manifest(manifest, signature=False).findings  # not locked: revision main
    assert ("model.revision", "drift.unpinned") in [(f.field, f.rule) for f in rows]


# --- run records what happened ------------------------------------------------


def test_run_records_refusal_start_and_exit(project: Path) -> None:
    ok = run_cli(
        "run", str(project), "--no-signature", "--guarded", "--", "sh", "-c", "exit 3", env=ENV
    )
    assert ok.returncode == 3, ok.stdout + ok.stderr
    (project.parent / "data" / "eval.jsonl").write_text("changed\n")
    refused = run_cli("run", str(project), "--no-signature", "--", "true", env=ENV)
    assert refused.returncode == 1
    accepted = run_cli(
        "run",
        str(project),
        "--no-signature",
        "--accept",
        "data[1].digest",
        "--reason",
        "reviewed",
        "--",
        sys.executable,
        "-c",
        "pass",
        env=ENV,
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    records = read_records(project)
    assert [(r["status"], r.get("exit_code")) for r in records] == [
        ("started", None),
        ("failed", 3),
        ("refused", None),
        ("started", None),
        ("completed", 0),
    ]
    assert records[2]["findings"][0]["field"] == "data[1].digest"
    assert records[3]["accepted"][0]["reason"] == "reviewed"
    assert records[0]["command"] == ["sh", "-c", "exit 3"]


def test_a_file_whose_ctime_is_fresh_is_not_cached(tmp_path: Path) -> None:
    """Write, put mtime back, hash: within one tick a second such write would hide."""
    import time

    from ftmanifest.hashing.files import hash_file
    from ftmanifest.statcache import StatCache

    p = tmp_path / "f.jsonl"
    p.write_text("a\n")
    old = time.time_ns() - 3600 * 10**9
    os.utime(p, ns=(old, old))
    cache = StatCache(tmp_path / "cache")
    hash_file(p, cache=cache)
    cache.flush()
    assert cache.stored == 0


# --- a folder's records -------------------------------------------------------


def test_a_folder_of_shards_counts_records_not_files(project: Path) -> None:
    shards = _data_folder_manifest(project)
    assert load_manifest(project).manifest.data[0].records == 2  # two shards, one line each
    with (shards / "part1.jsonl").open("a") as fh:
        fh.write('{"text": "more"}\n{"text": "and more"}\n')
    fields = _fields(project, scan=False)
    assert fields["data[0].records"] == "4"


def test_a_folder_declared_as_images_counts_files(project: Path) -> None:
    images = project.parent / "data" / "images"
    images.mkdir()
    for i in range(3):
        (images / f"{i}.png").write_bytes(b"\x89PNG" + bytes([i]))
    text = project.read_text().replace("path: data/train.jsonl", "path: data/images", 1)
    text = text.replace("    format: jsonl\n", "    format: images\n", 1)
    project.write_text(text)
    from ftmanifest.verify.lock import lock_manifest

    lock_manifest(project)
    assert load_manifest(project).manifest.data[0].records == 3


def test_accepting_a_data_entry_does_not_accept_its_scripts(project: Path) -> None:
    (project.parent / "scripts" / "clean_tickets.py").write_text("import os\n")
    report = verify_manifest(project, signature=False, accept={"data[0]": "relabelled"})
    assert [f.field for f in report.findings] == ["data[0].cleaning[0].digest"]


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_run_records_never_write_through_a_planted_file(project: Path, kind: str) -> None:
    from ftmanifest.ledger.runrecord import records_path

    train = project.parent / "data" / "train.jsonl"
    before = train.read_bytes()
    records_path(project).parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        records_path(project).symlink_to(train.parent)
    else:
        os.mkfifo(records_path(project))
    (project.parent / "data" / "eval.jsonl").write_text("changed\n")
    args = ["--no-signature", "--accept", "data[1].digest", "--reason", "reviewed"]
    result = run_cli("verify", str(project), *args, env=ENV)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot record the accepted drift" in result.stderr
    assert train.read_bytes() == before


def test_a_manifest_locked_on_a_dirty_tree_cannot_verify_the_code(project: Path) -> None:
    from ftmanifest.verify.lock import lock_manifest

    (project.parent / "train.py").write_text("print('uncommitted')\n")
    lock_manifest(project)
    assert "dirty: true" in project.read_text()
    (project.parent / "train.py").write_text("print('something else entirely')\n")
    rows = verify_manifest(project, signature=False).findings
    assert [(f.field, f.observed) for f in rows] == [
        ("environment.code.dirty", "dirty: train.py now")
    ]


def test_a_data_path_that_is_a_symlink_loop_is_a_row(project: Path) -> None:
    train = project.parent / "data" / "train.jsonl"
    train.unlink()
    train.symlink_to("train.jsonl")  # points at itself
    rows = within(20, lambda: verify_manifest(project, signature=False)).findings
    assert [f.field for f in rows if f.field == "data[0].digest"] == ["data[0].digest"]
    assert any("symlink loop" in (f.observed or "") + f.message for f in rows)
    result = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert result.returncode == 1 and "internal error" not in result.stderr


@pytest.mark.parametrize("tracked", [False, True], ids=["untracked-ledger", "tracked-ledger"])
def test_a_script_hidden_in_the_ledger_folder_is_code(project: Path, tracked: bool) -> None:
    """Ledger records are not training code; anything else in the ledger folder is."""
    from ftmanifest.ledger.runrecord import append, records_path

    root = project.parent
    git(root, "add", "exp.yaml")
    git(root, "commit", "-qm", "lock the manifest")
    append(project, {"status": "planned"})
    if tracked:
        git(root, "add", ".ftmanifest")
        git(root, "commit", "-qm", "the ledger")
        append(project, {"status": "planned"})  # one more, untracked, inside a tracked folder
    assert verify_manifest(project, signature=False).ok
    hook = records_path(project) / "sitecustomize.py"
    hook.write_text("print('runs at every start')\n")
    rows = verify_manifest(project, signature=False).findings
    assert [f.field for f in rows] == ["environment.code.dirty"], rows
    hook.unlink()
    assert verify_manifest(project, signature=False).ok


def test_a_script_committed_into_the_ledger_after_the_pin_is_a_code_change(
    project: Path,
) -> None:
    """HEAD may move on with ledger records committed; not with a script among them."""
    from ftmanifest.ledger.runrecord import append, records_path

    root = project.parent
    git(root, "add", "exp.yaml")
    git(root, "commit", "-qm", "lock the manifest")
    append(project, {"status": "planned"})
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "records")
    assert verify_manifest(project, signature=False).ok
    (records_path(project) / "sitecustomize.py").write_text("print('hidden')\n")
    git(root, "add", ".ftmanifest")
    git(root, "commit", "-qm", "a script among the records")
    rows = verify_manifest(project, signature=False).findings
    assert [f.field for f in rows] == ["environment.code.commit"], rows
    assert "sitecustomize.py" in str(rows[0].observed)
