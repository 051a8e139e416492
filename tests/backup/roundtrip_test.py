"""Backup then restore gives the same bytes, modes and mtimes (issue: "Must show" 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftmanifest.cli import main
from tests.backup.conftest import backup, restore_meta, sha256_of, tree_of

MiB = 1 << 20


def _write(path: Path, data: bytes, mode: int, mtime: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)
    os.utime(path, (mtime, mtime))
    return path


def _small_tree(root: Path) -> Path:
    """Empty, random and non-ASCII files, nested folders, modes 0600/0640/0755/0444,
    folders 0750 and 0555 (read-only: filled before its mode is set)."""
    src = root / "run"
    _write(src / "empty", b"", 0o644, 1_600_000_001)
    _write(src / "random.bin", os.urandom(70_000), 0o600, 1_600_000_002)
    _write(src / "café é.txt", "é\n".encode(), 0o640, 1_600_000_003)
    _write(src / "中文" / "数据.json", b'{"a": 1}\n', 0o644, 1_600_000_004)
    _write(src / "emoji 🚀" / "🦙.txt", "🦙\n".encode(), 0o755, 1_600_000_005)
    _write(src / "a" / "b" / "c" / "deep.txt", b"deep\n", 0o644, 1_600_000_006)
    _write(src / "private" / "secret.txt", b"s3cret\n", 0o600, 1_600_000_007)
    _write(src / "readonly" / "frozen.txt", b"frozen\n", 0o444, 1_600_000_008)
    os.chmod(src / "private", 0o750)
    os.chmod(src / "readonly", 0o555)
    os.chmod(src / "a" / "b", 0o755)
    return src


def _mtimes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): int(p.stat().st_mtime)
        for p in root.rglob("*")
        if p.is_file()
    }


def test_tree_round_trip_keeps_bytes_modes_and_mtimes(keys, tmp_path):
    src = _small_tree(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    done = restore_meta(keys, created.meta_path, tmp_path / "dest")
    restored = tmp_path / "dest" / "run"
    assert tree_of(restored) == tree_of(src)
    assert _mtimes(restored) == _mtimes(src)
    assert (restored / "private").stat().st_mode & 0o777 == 0o750
    assert (restored / "emoji 🚀" / "🦙.txt").stat().st_mode & 0o777 == 0o755
    assert done.read.signers and not done.replaced
    assert (restored / "readonly").stat().st_mode & 0o777 == 0o555
    assert created.meta.files == 8
    assert sorted(os.listdir(tmp_path / "dest")) == ["run"]


def test_large_and_sparse_files_round_trip(keys, tmp_path):
    """~200 MB of a repeating pattern and a ~300 MB file that is all hole but
    a few bytes: bit-identical, and the restored sparse file is still sparse."""
    src = tmp_path / "big"
    src.mkdir()
    pattern = os.urandom(MiB - 7)  # odd length: chunk boundaries fall inside it
    with open(src / "weights.bin", "wb") as fh:
        for _ in range(200):
            fh.write(pattern)
    with open(src / "sparse.bin", "wb") as fh:
        fh.truncate(300 * MiB)
        fh.seek(150 * MiB + 3)
        fh.write(b"middle")
    os.utime(src / "sparse.bin", (1_650_000_000, 1_650_000_000))
    created = backup(keys, [src], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    out = tmp_path / "dest" / "big"
    for name in ("weights.bin", "sparse.bin"):
        assert (out / name).stat().st_size == (src / name).stat().st_size
        assert sha256_of(out / name) == sha256_of(src / name)
    st = (out / "sparse.bin").stat()
    assert st.st_blocks * 512 < st.st_size // 50, "the restored sparse file has no holes"
    assert int(st.st_mtime) == 1_650_000_000


def test_single_file_path(keys, tmp_path):
    one = _write(tmp_path / "config.yaml", b"lr: 0.1\n", 0o640, 1_600_000_100)
    created = backup(keys, [one], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest") == {"config.yaml": ("file", 0o640, sha256_of(one))}
    assert int((tmp_path / "dest" / "config.yaml").stat().st_mtime) == 1_600_000_100


def test_two_paths_in_one_backup(keys, tmp_path):
    src = _small_tree(tmp_path)
    log = _write(tmp_path / "logs" / "train.log", b"step 1\n" * 100, 0o644, 1_600_000_200)
    created = backup(keys, [src, log], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    got = tree_of(tmp_path / "dest")
    assert got["train.log"] == ("file", 0o644, sha256_of(log))
    assert {k[4:]: v for k, v in got.items() if k.startswith("run/")} == tree_of(src)
    assert set(got) == {"run", "train.log"} | {f"run/{k}" for k in tree_of(src)}


def test_two_paths_with_one_name_are_refused(keys, tmp_path):
    from ftmanifest.errors import InputError

    a = _write(tmp_path / "a" / "x.txt", b"a", 0o644, 1)
    b = _write(tmp_path / "b" / "x.txt", b"b", 0o644, 1)
    with pytest.raises(InputError, match="same name"):
        backup(keys, [a, b], tmp_path / "backups")
    assert not (tmp_path / "backups").exists() or not any((tmp_path / "backups").iterdir())


def _cli_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_cli_round_trip_with_recipient_json(keys, tmp_path, capsys):
    src = _small_tree(tmp_path)
    out = tmp_path / "backups"
    code, made = _cli_json(
        capsys,
        ["backup", "create", str(src), "--to", str(out), "--key", str(keys.signing_path),
         "-r", keys.recipient.text, "--kind", "checkpoint", "--tag", "nightly"],
    )  # fmt: skip
    assert code == 0
    meta_path = Path(made["metadata"])
    assert made["predicate"]["kind"] == "checkpoint" and made["predicate"]["tags"] == ["nightly"]
    assert made["key_file"] is None and Path(made["archive"]).is_file()
    assert made["predicate"]["archive"]["sha256"] == sha256_of(Path(made["archive"]))

    code, checked = _cli_json(
        capsys, ["backup", "check", str(out), "--trust", str(keys.trust_path)]
    )
    assert code == 0 and checked["ok"] is True
    assert [b["data_read"] for b in checked["backups"]] == [False]
    code, checked = _cli_json(
        capsys,
        ["backup", "check", str(out), "--trust", str(keys.trust_path),
         "--read-data", "-i", str(keys.identity_path)],
    )  # fmt: skip
    assert code == 0 and [b["data_read"] for b in checked["backups"]] == [True]

    dest = tmp_path / "dest"
    code, done = _cli_json(
        capsys,
        ["restore", made["archive"], "--to", str(dest), "-i", str(keys.identity_path),
         "--trust", str(keys.trust_path)],
    )  # fmt: skip
    assert code == 0, done
    assert done["backup_id"] == meta_path.name.removesuffix(".meta.json")
    assert done["files"] == 8 and done["replaced"] is False
    assert done["index_signers"] == done["metadata_signers"] != []
    assert tree_of(dest / "run") == tree_of(src)


def test_passphrase_round_trip_through_the_cli(keys, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BACKUP_PW", "correct horse battery staple")
    src = _small_tree(tmp_path)
    out = tmp_path / "backups"
    code, made = _cli_json(
        capsys,
        ["backup", "create", str(src), "--to", str(out), "--key", str(keys.signing_path),
         "--passphrase-env", "BACKUP_PW"],
    )  # fmt: skip
    assert code == 0
    key_file = Path(made["key_file"])
    assert key_file.name.endswith(".key.age") and key_file.stat().st_mode & 0o777 == 0o600
    assert made["predicate"]["recipients"] == [{"type": "scrypt", "fingerprint": key_file.name}]
    assert made["predicate"]["key_file"]["sha256"] == sha256_of(key_file)

    trust = ["--trust", str(keys.trust_path)]
    code, checked = _cli_json(
        capsys,
        ["backup", "check", str(out), "--read-data", "--passphrase-env", "BACKUP_PW", *trust],
    )
    assert code == 0 and checked["backups"][0]["data_read"] is True

    dest = tmp_path / "dest"
    code, done = _cli_json(
        capsys,
        ["restore", made["metadata"], "--to", str(dest), "--passphrase-env", "BACKUP_PW", *trust],
    )
    assert code == 0, done
    assert tree_of(dest / "run") == tree_of(src)
    assert _mtimes(dest / "run") == _mtimes(src)


def test_text_output_of_backup_and_restore(keys, tmp_path, capsys):
    one = _write(tmp_path / "notes.md", b"# notes\n", 0o644, 1)
    out = tmp_path / "backups"
    argv = ["backup", "create", str(one), "--to", str(out), "--key", str(keys.signing_path)]
    assert main(argv + ["-r", keys.recipient.text]) == 0
    text = capsys.readouterr().out
    assert "files:     1" in text and keys.recipient.text in text
    (meta_path,) = out.glob("*.meta.json")
    dest = tmp_path / "dest"
    argv = ["restore", str(meta_path), "--to", str(dest), "-i", str(keys.identity_path)]
    assert main(argv + ["--trust", str(keys.trust_path)]) == 0
    assert "every sha256 matches what the backup signed" in capsys.readouterr().out
    assert (dest / "notes.md").read_bytes() == b"# notes\n"
