"""Run folders' own data formats are read as the data they are.

TensorBoard event files, SQLite stores, ``.tar.gz`` logs and a zip inside a
zip used to be "not scanned" or "over the cap, raise the cap" (no cap was
involved), so every run with TensorBoard logs failed audit and a token in
any of them was never looked for.  Each case is read back by the real reader
(sqlite3, tarfile, zipfile; TFRecord framing per its spec, as TensorBoard is
not installed here) to show the token is really there.
"""

from __future__ import annotations

import io
import sqlite3
import struct
import tarfile
import zipfile
from pathlib import Path

from ftmanifest.scan.engine import scan_paths

TOKEN = "ghp_" + "Wd3Kq8Lz1Nx6Vb9Mt2Rc5Hy7Pf4Gs0Ja1Ue9"


def _found(path: Path) -> list[tuple[str, str, object]]:
    return [(f.rule, f.severity, f.extra.get("member")) for f in scan_paths([path]).findings]


def _record(payload: bytes) -> bytes:
    return struct.pack("<Q", len(payload)) + b"\0" * 4 + payload + b"\0" * 4


def _event_text(text: str) -> bytes:
    # Event{wall_time: 1.0 (field 1, double), file_version (field 3, string)}
    body = text.encode()
    return b"\x09" + struct.pack("<d", 1.0) + b"\x1a" + bytes([len(body)]) + body


def test_a_token_in_a_tensorboard_event_file(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.node1.42.0"
    path.write_bytes(_record(_event_text("brain.Event:2")) + _record(_event_text(f"t {TOKEN}")))
    assert TOKEN.encode() in path.read_bytes().split(b"\x1a")[-1]
    assert _found(path) == [("secret.github-pat", "error", None)]


def test_scalars_in_a_tensorboard_event_file_are_clean(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.node1.42.0"
    path.write_bytes(b"".join(_record(_event_text(f"loss {i}")) for i in range(50)))
    assert _found(path) == []


def test_a_cut_event_file_is_an_error_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.node1.42.0"
    path.write_bytes(_record(_event_text("brain.Event:2"))[:-7])
    assert _found(path) == [("tfrecord.unreadable", "error", None)]


def test_a_token_in_an_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "mlruns.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE params (key TEXT, value TEXT, raw BLOB)")
    db.execute("INSERT INTO params VALUES ('lr', '0.0002', NULL)")
    db.execute("INSERT INTO params VALUES ('hub', NULL, ?)", (f"token={TOKEN}".encode(),))
    db.commit()
    db.close()
    with sqlite3.connect(path) as check:
        assert any(TOKEN.encode() in (r[0] or b"") for r in check.execute("SELECT raw FROM params"))
    assert _found(path) == [("secret.github-pat", "error", "table params")]
    clean = tmp_path / "clean.db"
    with sqlite3.connect(clean) as db2:
        db2.execute("CREATE TABLE metrics (step INT, loss REAL)")
        db2.executemany("INSERT INTO metrics VALUES (?, ?)", [(i, 1 / (i + 1)) for i in range(9)])
    assert _found(clean) == []


def test_a_broken_sqlite_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert [rule for rule, severity, _ in _found(path) if severity == "error"] == [
        "sqlite.unreadable"
    ]


def test_a_token_in_a_tar_gz_of_logs(tmp_path: Path) -> None:
    path = tmp_path / "logs.tar.gz"
    body = f"step 3 push {TOKEN}\n".encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("run/train.log")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with tarfile.open(path) as tar:
        member = tar.extractfile("run/train.log")
        assert member is not None and TOKEN.encode() in member.read()
    assert _found(path) == [("secret.github-pat", "error", "run/train.log")]


def test_a_token_in_a_zip_inside_a_zip(tmp_path: Path) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("notes.txt", f"key {TOKEN}\n")
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("inner.zip", inner.getvalue())
    with zipfile.ZipFile(path) as zf, zipfile.ZipFile(zf.open("inner.zip")) as nested:
        assert TOKEN in nested.read("notes.txt").decode()
    assert _found(path) == [("secret.github-pat", "error", "inner.zip!notes.txt")]
