"""``ftmanifest prune``: the retention policy applied to real backups on disk."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ftmanifest.backup.prune import LOG_NAME, apply, plan
from ftmanifest.backup.retention import EmptyPolicyError
from ftmanifest.cli import main
from ftmanifest.manifest.retention import KeepPolicy

from .conftest import Keys, backup

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def _series(keys: Keys, tmp_path: Path, days: int, **kw: object) -> tuple[Path, list[str]]:
    src = tmp_path / "run"
    src.mkdir(exist_ok=True)
    (src / "log.txt").write_text("step 1\n")
    to = tmp_path / "backups"
    ids = [
        backup(keys, [src], to, now=T0 + timedelta(days=i), **kw).meta.backup_id
        for i in range(days)
    ]
    return to, ids


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_keep_last_dry_run_deletes_nothing(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 4)
    before = _files(to)
    result = plan(to, lambda kind: KeepPolicy(keep_last=2), trust_path=keys.trust_path)
    assert [d.item.backup_id for d in result.decisions if d.keep] == ids[:1:-1]
    assert {m.backup_id for m in result.to_remove()} == set(ids[:2])
    assert _files(to) == before


def test_apply_logs_then_deletes_every_file_of_a_backup(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 3, passphrase="pw")  # three files per backup
    result = plan(to, lambda kind: KeepPolicy(keep_last=1), trust_path=keys.trust_path)
    apply(to, result, {"keep_last": 1})
    assert sorted(result.deleted) == sorted(ids[:2])
    left = _files(to)
    assert not any(i in name for i in ids[:2] for name in left)
    assert {f"{ids[2]}.age", f"{ids[2]}.meta.json", f"{ids[2]}.key.age", LOG_NAME} == left
    log = [json.loads(line) for line in (to / LOG_NAME).read_text().splitlines()]
    assert {e["backup_id"] for e in log} == set(ids[:2])
    assert all(e["policy"] == {"keep_last": 1} and len(e["files"]) == 3 for e in log)


def test_newest_is_kept_even_when_no_rule_keeps_it(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 3)
    # within 1h of the newest: only the newest qualifies anyway; the rule set is not empty
    result = plan(to, lambda kind: KeepPolicy(keep_within="1h"), trust_path=keys.trust_path)
    kept = [d for d in result.decisions if d.keep]
    assert [d.item.backup_id for d in kept] == [ids[-1]]


def test_damaged_newest_does_not_count_and_is_not_deleted(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 3)
    newest = to / f"{ids[-1]}.age"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 1
    newest.write_bytes(bytes(data))
    result = plan(to, lambda kind: KeepPolicy(keep_last=1), trust_path=keys.trust_path)
    # the last good copy is kept; the damaged one is a problem, never a candidate
    assert [d.item.backup_id for d in result.decisions if d.keep] == [ids[1]]
    assert [f.rule for f in result.problems] == ["backup.archive-digest-mismatch"]
    apply(to, result, {})
    assert newest.exists() and (to / f"{ids[1]}.age").exists()
    assert not (to / f"{ids[0]}.age").exists()


def test_untrusted_metadata_is_listed_and_kept(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 2)
    stranger = backup(keys, [tmp_path / "run"], tmp_path / "elsewhere", now=T0)
    # a backup signed by a key nobody trusts, copied in
    from ftmanifest.backup.meta import sign_meta

    foreign = to / stranger.meta_path.name
    foreign.write_bytes(sign_meta(stranger.meta, keys.other_signing))
    (to / stranger.archive.name).write_bytes(stranger.archive.read_bytes())
    result = plan(to, lambda kind: KeepPolicy(keep_last=1), trust_path=keys.trust_path)
    assert {d.item.backup_id for d in result.decisions} == set(ids)
    assert len(result.problems) == 1 and result.problems[0].path.endswith(foreign.name)
    apply(to, result, {})
    assert foreign.exists()


def test_groups_by_experiment_and_kind(keys: Keys, tmp_path: Path) -> None:
    src = tmp_path / "run"
    src.mkdir()
    (src / "a").write_text("a")
    to = tmp_path / "backups"
    for exp in ("exp-a", "exp-b"):
        for kind in ("logs", "checkpoint"):
            for i in range(2):
                backup(keys, [src], to, kind=kind, experiment_id=exp,
                       now=T0 + timedelta(hours=i))  # fmt: skip
    result = plan(to, lambda kind: KeepPolicy(keep_last=1), trust_path=keys.trust_path)
    assert sum(d.keep for d in result.decisions) == 4  # the newest of each of 4 groups
    scoped = plan(to, lambda kind: KeepPolicy(keep_last=1), experiment_id="exp-a",
                  trust_path=keys.trust_path)  # fmt: skip
    assert len(scoped.decisions) == 4 and len(scoped.outside) == 4


def test_empty_policy_is_refused(keys: Keys, tmp_path: Path) -> None:
    to, _ = _series(keys, tmp_path, 2)
    with pytest.raises(EmptyPolicyError):
        plan(to, lambda kind: KeepPolicy(), trust_path=keys.trust_path)


def test_cli_dry_run_then_apply(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to, ids = _series(keys, tmp_path, 3)
    argv = ["prune", str(to), "--keep-last", "2", "--trust", str(keys.trust_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"remove   {ids[0]}" in out and "dry run" in out
    assert (to / f"{ids[0]}.age").exists()
    assert main([*argv, "--apply", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["deleted"] == [ids[0]] and not (to / f"{ids[0]}.age").exists()


def test_cli_manifest_policy_needs_a_trusted_signature(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.signing.keys import load_private_key
    from ftmanifest.signing.sign import sign_manifest

    to, ids = _series(keys, tmp_path, 3, experiment_id="exp-p")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "ftmanifest: 1\nexperiment: {id: exp-p}\nmodel: {path: model}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
        "security:\n  retention:\n    backups: {keep_last: 1}\n"
    )
    argv = ["prune", str(to), "--manifest", str(manifest), "--trust", str(keys.trust_path)]
    assert main(argv) == 1  # unsigned: its policy must not decide deletions
    capsys.readouterr()
    sign_manifest(
        manifest, load_manifest(manifest).canonical(), load_private_key(keys.signing_path)
    )
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"remove   {ids[0]}" in out and f"remove   {ids[1]}" in out


def test_cli_manifest_without_backup_policy_is_refused(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.signing.keys import load_private_key
    from ftmanifest.signing.sign import sign_manifest

    to, _ = _series(keys, tmp_path, 2, experiment_id="exp-q")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "ftmanifest: 1\nexperiment: {id: exp-q}\nmodel: {path: model}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
    )
    sign_manifest(
        manifest, load_manifest(manifest).canonical(), load_private_key(keys.signing_path)
    )
    assert main(["prune", str(to), "--manifest", str(manifest), "--trust",
                 str(keys.trust_path)]) == 1  # fmt: skip
    assert "no backup retention policy" in capsys.readouterr().err
