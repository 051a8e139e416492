"""``prune`` under attack: nothing deleted that must be kept.

An attacker (or an accident) who can write the backups folder flips a byte of
a passphrase backup's key file, makes two backups in one second, dates a
backup years ahead, or plants a FIFO, a symlink or a folder where prune
writes its log or deletes a file.  prune keeps only backups that ``backup
check`` passes, orders by a sub-second time and a sequence, measures
``keep_within`` from now, and deletes a backup whole or not at all, through
a descriptor of the folder.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ftmanifest.backup.check import check_folder
from ftmanifest.backup.meta import read_meta
from ftmanifest.backup.prune import LOG_NAME, apply, plan
from ftmanifest.cli import main
from ftmanifest.errors import EXIT_INPUT, EXIT_OK, EXIT_REFUSED, InputError, NotRegularFileError
from ftmanifest.manifest.retention import KeepPolicy

from .conftest import Keys, backup

NOW = datetime.now(timezone.utc)


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "run"
    src.mkdir(exist_ok=True)
    (src / "log.txt").write_text("step 1\n")
    return src


def _series(
    keys: Keys, tmp_path: Path, *days_ago: float, passphrase_at: tuple[int, ...] = ()
) -> tuple[Path, list[str]]:
    """One backup per ``days_ago`` (negative: in the future), oldest given first;
    those at ``passphrase_at`` with a passphrase (a key file: three files)."""
    src = _src(tmp_path)
    to = tmp_path / "backups"
    ids = []
    for n, d in enumerate(days_ago):
        kw = {"passphrase": "pw"} if n in passphrase_at else {}
        ids.append(backup(keys, [src], to, now=NOW - timedelta(days=d), **kw).meta.backup_id)
    return to, ids


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def _of(folder: Path, backup_id: str) -> set[str]:
    return {n for n in _files(folder) if n.startswith(backup_id)}


def _keep(n: int = 1) -> object:
    return lambda kind: KeepPolicy(keep_last=n)


# -- item 3: prune keeps only what backup check passes ------------------------------


def test_a_flipped_byte_in_the_key_file_is_not_counted_as_kept(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to, (old, new) = _series(keys, tmp_path, 2, 1, passphrase_at=(1,))
    key = to / f"{new}.key.age"
    data = bytearray(key.read_bytes())
    data[len(data) // 2] ^= 1
    key.write_bytes(bytes(data))
    refused = {c.meta_path.name for c in check_folder(to, trust_path=keys.trust_path)[0]
               if not c.ok}  # fmt: skip
    assert refused == {f"{new}.meta.json"}
    before = _files(to)
    argv = ["prune", str(to), "--keep-last", "1", "--apply", "--trust", str(keys.trust_path)]
    assert main([*argv, "--format", "json"]) == EXIT_REFUSED
    doc = json.loads(capsys.readouterr().out)
    assert doc["deleted"] == [] and _files(to) - {LOG_NAME} == before
    assert [d["backup_id"] for d in doc["decisions"] if d["keep"]] == [old]
    (problem,) = doc["findings"]
    assert doc["problems"] == doc["findings"]  # the older name, kept for a release
    assert problem["rule"] == "backup.key-file-mismatch"
    assert problem["path"] == str(key) and problem["field"] == "key_file.sha256"
    assert problem["expected"].startswith("sha256:") and problem["observed"].startswith("sha256:")
    assert problem["hint"]


def test_prune_and_backup_check_refuse_the_same_backups(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 4, 3, 2, 1, passphrase_at=(1,))
    (to / f"{ids[1]}.key.age").unlink()
    (to / f"{ids[2]}.age").write_bytes(b"age-encryption.org/v1\n")
    refused = {str(c.meta_path) for c in check_folder(to, trust_path=keys.trust_path)[0]
               if not c.ok}  # fmt: skip
    result = plan(to, _keep(), trust_path=keys.trust_path)
    assert {d.item.backup_id for d in result.decisions} == {ids[0], ids[3]}
    assert {str(to / f"{ids[i]}.meta.json") for i in (1, 2)} == refused
    assert len(result.problems) == 2


def test_a_folder_as_a_key_file_keeps_the_whole_backup(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to, ids = _series(keys, tmp_path, 3, 2, 1, passphrase_at=(0,))
    key = to / f"{ids[0]}.key.age"
    key.unlink()
    key.mkdir()
    argv = ["prune", str(to), "--keep-last", "1", "--apply", "--trust", str(keys.trust_path)]
    assert main(argv) == EXIT_REFUSED
    out = capsys.readouterr().out
    assert "backup.key-file-mismatch" in out and f"{ids[0]}.key.age" in out
    assert _of(to, ids[0]) == {f"{ids[0]}{s}" for s in (".age", ".meta.json", ".key.age")}
    assert _of(to, ids[1]) == set() and len(_of(to, ids[2])) == 2


# -- item 4: two backups in the same second ----------------------------------------


def test_the_newer_of_two_backups_in_one_second_is_kept(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the newer one gets the id that sorts first: a tie broken by the id deletes it
    hexes = iter(["ffffffffffff", "000000000000"])
    real = secrets.token_hex
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: next(hexes) if n == 6 else real(n))
    to, (first, second) = _series(keys, tmp_path, 0, 0)  # the very same instant
    assert first[:-12] == second[:-12]
    result = plan(to, _keep(), trust_path=keys.trust_path)
    assert [d.item.backup_id for d in result.decisions if d.keep] == [second]
    apply(to, result, {"keep_last": 1})
    assert _of(to, first) == set() and len(_of(to, second)) == 2


def test_new_metadata_signs_a_precise_time_and_a_sequence(keys: Keys, tmp_path: Path) -> None:
    src = _src(tmp_path)
    to = tmp_path / "backups"
    made = [backup(keys, [src], to) for _ in range(3)]
    metas = [read_meta(c.meta_path, trust_path=keys.trust_path)[0] for c in made]
    assert [m.sequence for m in metas] == [1, 2, 3]
    assert all(m.created_precise is not None for m in metas)
    assert [m.created_precise for m in metas] == sorted(m.created_precise for m in metas)
    predicate = metas[0].predicate()
    assert predicate["created"].endswith("Z") and "." not in predicate["created"]
    assert "." in predicate["created_precise"] and predicate["sequence"] == 1


def test_metadata_without_the_new_fields_still_reads(keys: Keys, tmp_path: Path) -> None:
    import dataclasses

    from ftmanifest.backup.meta import sign_meta

    to, (old_id,) = _series(keys, tmp_path, 1)
    path = to / f"{old_id}.meta.json"
    meta = read_meta(path, trust_path=keys.trust_path)[0]
    path.write_bytes(sign_meta(dataclasses.replace(meta, created_precise=None, sequence=None),
                               keys.signing))  # fmt: skip
    assert "sequence" not in json.dumps(read_meta(path, trust_path=keys.trust_path)[0].predicate())
    assert [d.keep for d in plan(to, _keep(), trust_path=keys.trust_path).decisions] == [True]


# -- item 5: a backup from the future -----------------------------------------------


def test_a_backup_from_the_future_deletes_nothing(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to, ids = _series(keys, tmp_path, 3, 2, 1, -730)
    before = _files(to)
    argv = ["prune", str(to), "--keep-within", "30d", "--apply", "--trust", str(keys.trust_path)]
    assert main([*argv, "--format", "json"]) == EXIT_OK  # a warning, not a refusal
    doc = json.loads(capsys.readouterr().out)
    assert doc["deleted"] == [] and _files(to) - {LOG_NAME} == before
    (warning,) = doc["problems"]
    assert warning["severity"] == "warning" and warning["rule"] == "backup.created-in-future"
    assert warning["path"] == str(to / f"{ids[3]}.meta.json") and warning["field"] == "created"
    assert warning["expected"].startswith("at most") and warning["observed"]
    assert "clock" in warning["hint"]


def test_a_backup_from_the_future_takes_no_keep_last_slot(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 3, 2, 1, -730)
    result = plan(to, _keep(), trust_path=keys.trust_path)
    kept = {d.item.backup_id: d.reasons for d in result.decisions if d.keep}
    assert set(kept) == {ids[2], ids[3]}
    assert "last 1" in kept[ids[2]] and "last 1" not in kept[ids[3]]
    assert {m.backup_id for m in result.to_remove()} == {ids[0], ids[1]}


def test_keep_within_is_measured_from_now(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 40, 20, 10)
    result = plan(to, lambda kind: KeepPolicy(keep_within="15d"), trust_path=keys.trust_path)
    assert {m.backup_id for m in result.to_remove()} == {ids[0], ids[1]}


# -- item 6: the log, the files and the folder ---------------------------------------


def test_a_fifo_as_the_log_is_refused_without_blocking(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 2, 1)
    os.mkfifo(to / LOG_NAME)
    before = _files(to)
    argv = ["prune", str(to), "--keep-last", "1", "--apply", "--trust", str(keys.trust_path)]
    env = {**os.environ, "FTMANIFEST_DEBUG": ""}
    done = subprocess.run([sys.executable, "-m", "ftmanifest", *argv], capture_output=True,
                          text=True, timeout=20, env=env)  # fmt: skip
    assert done.returncode == EXIT_INPUT, done.stderr
    assert _files(to) == before
    assert LOG_NAME in done.stderr and "FIFO" in done.stderr
    assert "expected: a regular file" in done.stderr and "reason: not-regular-file" in done.stderr


@pytest.mark.parametrize("kind", ["fifo with a reader", "symlink", "folder"])
def test_a_log_that_is_not_a_regular_file_deletes_nothing(
    keys: Keys, tmp_path: Path, kind: str
) -> None:
    to, ids = _series(keys, tmp_path, 2, 1)
    log = to / LOG_NAME
    reader = None
    if kind == "symlink":
        (tmp_path / "elsewhere.jsonl").write_text("")
        log.symlink_to(tmp_path / "elsewhere.jsonl")
    elif kind == "folder":
        log.mkdir()
    else:
        os.mkfifo(log)
        reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    before = _files(to)
    result = plan(to, _keep(), trust_path=keys.trust_path)
    try:
        with pytest.raises(NotRegularFileError) as err:
            apply(to, result, {"keep_last": 1})
    finally:
        if reader is not None:
            os.close(reader)
    assert _files(to) == before and result.deleted == []
    assert err.value.path == str(log) and err.value.expected == "a regular file"
    assert err.value.observed and err.value.hint
    assert (tmp_path / "elsewhere.jsonl").read_text() == "" if kind == "symlink" else True


def test_a_file_turned_into_a_folder_after_the_plan_deletes_nothing(
    keys: Keys, tmp_path: Path
) -> None:
    to, ids = _series(keys, tmp_path, 3, 2, 1, passphrase_at=(1,))
    result = plan(to, _keep(), trust_path=keys.trust_path)
    key = to / f"{ids[1]}.key.age"
    key.unlink()
    key.mkdir()
    before = _files(to)
    with pytest.raises(NotRegularFileError) as err:
        apply(to, result, {"keep_last": 1})
    assert _files(to) == before and result.deleted == [] and not (to / LOG_NAME).exists()
    assert err.value.path == str(key) and err.value.observed == "a folder"
    assert "nothing was deleted" in (err.value.hint or "")


def test_a_folder_swapped_after_the_plan_deletes_nothing(keys: Keys, tmp_path: Path) -> None:
    to, ids = _series(keys, tmp_path, 2, 1)
    result = plan(to, _keep(), trust_path=keys.trust_path)
    moved = tmp_path / "moved"
    to.rename(moved)
    shutil.copytree(moved, to)  # the same names, another folder
    with pytest.raises(InputError) as err:
        apply(to, result, {"keep_last": 1})
    assert _files(to) == _files(moved) and len(_of(to, ids[0])) == 2
    assert err.value.path == str(to) and "changed" in err.value.message


def test_a_half_deleted_backup_is_never_good_and_never_stuck(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    to, ids = _series(keys, tmp_path, 2, 1, passphrase_at=(0,))
    result = plan(to, _keep(), trust_path=keys.trust_path)
    real = os.unlink
    calls: list[str] = []

    def unlink_then_die(name: str, *args: object, **kw: object) -> None:
        calls.append(str(name))
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed between two files of one backup
        real(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink_then_die)
    with pytest.raises(KeyboardInterrupt):
        apply(to, result, {"keep_last": 1})
    monkeypatch.setattr(os, "unlink", real)
    checked, stray = check_folder(to, trust_path=keys.trust_path)
    assert [c.meta.backup_id for c in checked if c.meta] == [ids[1]] and all(c.ok for c in checked)
    # what is left has no metadata: files no backup names, never a backup to judge again
    assert stray and all(Path(f.path).name.startswith(ids[0]) for f in stray)
    assert not (to / f"{ids[0]}.meta.json").exists()
    assert plan(to, _keep(), trust_path=keys.trust_path).problems == []
