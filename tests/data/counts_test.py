"""``data check``: data entries' records and digests against the manifest, as verify."""

from __future__ import annotations

import json
from pathlib import Path

from ftmanifest.data.counts import count_findings
from ftmanifest.hashing.files import hash_file
from ftmanifest.manifest import load_manifest
from tests.conftest import run_cli

MANIFEST = """\
ftmanifest: 1
experiment: {{id: counts}}
model: {{path: model}}
data:
  - {{name: train, role: train, path: train.jsonl, digest: "{train}", records: {n_train}}}
  - {{name: eval, role: eval, path: eval.jsonl, digest: "{eval}", records: 2}}
  - {{name: notes, role: other, path: notes.txt}}
"""


def pinned(root: Path, n_train: int = 3) -> Path:
    (root / "train.jsonl").write_text("".join(f'{{"text": "train {i} a b"}}\n' for i in range(3)))
    (root / "eval.jsonl").write_text('{"text": "eval x y"}\n{"text": "eval z w"}\n')
    (root / "notes.txt").write_text("free text\n")
    manifest = root / "exp.yaml"
    digests = {k: hash_file(root / f"{k}.jsonl").digest for k in ("train", "eval")}
    manifest.write_text(MANIFEST.format(n_train=n_train, **digests))
    return manifest


def test_matching_counts_and_digests_hold_nothing_but_the_unpinned_entry(tmp_path: Path) -> None:
    loaded = load_manifest(pinned(tmp_path))
    (unpinned,) = count_findings(loaded)
    assert unpinned.severity == "warning" and unpinned.field == "data[2].digest"
    assert "ftmanifest lock" in (unpinned.hint or "")


def test_a_changed_file_is_a_digest_and_record_count_error(tmp_path: Path) -> None:
    manifest = pinned(tmp_path)
    before = hash_file(tmp_path / "train.jsonl").digest
    with (tmp_path / "train.jsonl").open("a") as f:
        f.write('{"text": "one more record"}\n')
    findings = {f.field: f for f in count_findings(load_manifest(manifest))}
    digest, records = findings["data[0].digest"], findings["data[0].records"]
    assert digest.severity == records.severity == "error"
    assert (
        digest.expected == before and digest.observed == hash_file(tmp_path / "train.jsonl").digest
    )
    assert (records.expected, records.observed) == ("3", "4")
    assert "'train'" in records.message and "ftmanifest lock" in (records.hint or "")
    result = run_cli("data", "check", str(manifest), "--format", "json")
    payload = json.loads(result.stdout)
    assert result.returncode == 1 and payload["checks_ok"] is False
    assert {f["field"] for f in payload["findings"] if f["severity"] == "error"} == {
        "data[0].digest",
        "data[0].records",
    }
    text = run_cli("data", "check", str(manifest)).stdout
    assert "data[0].records" in text and "expected: 3" in text and "observed: 4" in text


def test_a_wrong_record_count_alone_is_an_error(tmp_path: Path) -> None:
    manifest = pinned(tmp_path, n_train=5)
    (row,) = [f for f in count_findings(load_manifest(manifest)) if f.severity == "error"]
    assert (row.field, row.expected, row.observed) == ("data[0].records", "5", "3")


def test_the_rows_are_verify_s_rows(tmp_path: Path) -> None:
    from ftmanifest.verify import verify_manifest

    manifest = pinned(tmp_path, n_train=5)
    (tmp_path / "eval.jsonl").write_text('{"text": "changed"}\n')
    ours = {(f.field, f.expected, f.observed) for f in count_findings(load_manifest(manifest))}
    report = verify_manifest(manifest, signature=False, scan=False)
    theirs = {
        (f.field, f.expected, f.observed) for f in report.findings if f.loc and f.loc[0] == "data"
    }
    assert ours == theirs and len(ours) == 4  # train records; eval digest, records; notes
