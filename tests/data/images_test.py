"""``data check`` over image classification folders: stats, bad files, duplicates."""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from ftmanifest.data import images as images_mod
from ftmanifest.data.images import check_images
from ftmanifest.data.leak_report import Split
from ftmanifest.manifest.data import LeakTolerance
from tests.conftest import run_cli

MANIFEST = """\
ftmanifest: 1
experiment: {{id: images}}
model: {{path: model}}
data:
  - {{name: train, role: train, path: train, format: images}}
  - {{name: eval, role: eval, path: eval, format: images}}
  - {{name: test, role: test, path: test, format: images, sealed: {sealed}}}
"""


def save(path: Path, size: tuple[int, int], mode: str, seed: int, fmt: str = "PNG") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new(mode, size)
    im.putdata([(seed * 37 + i) % 256 if mode in ("L", "P") else
                tuple((seed * 31 + i * (c + 1)) % 256 for c in range(len(mode)))
                for i in range(size[0] * size[1])])  # fmt: skip
    im.save(path, fmt)
    return path


def folders(root: Path) -> Path:
    """train: cat 3 (mixed sizes, modes, PNG and JPEG), dog 2; eval and test: one each."""
    save(root / "train/cat/a.png", (32, 16), "RGB", 1)
    save(root / "train/cat/b.jpg", (20, 20), "L", 2, "JPEG")
    save(root / "train/cat/nested/c.png", (64, 48), "RGBA", 3)
    save(root / "train/dog/d.png", (10, 30), "P", 4)
    save(root / "train/dog/e.jpg", (40, 40), "RGB", 5, "JPEG")
    save(root / "eval/cat/f.png", (16, 16), "RGB", 6)
    save(root / "eval/dog/g.png", (16, 16), "RGB", 7)
    save(root / "test/cat/h.png", (16, 16), "RGB", 8)
    save(root / "test/dog/i.png", (16, 16), "RGB", 9)
    manifest = root / "exp.yaml"
    manifest.write_text(MANIFEST.format(sealed="false"))
    return manifest


def splits(root: Path, sealed: bool = False) -> list[Split]:
    return [Split("train", "train", root / "train", "images"),
            Split("eval", "eval", root / "eval", "images"),
            Split("test", "test", root / "test", "images", sealed)]  # fmt: skip


def by_rule(findings: list[Any], rule: str) -> list[Any]:
    return [f for f in findings if f.rule == rule]


def test_class_counts_sizes_and_modes(tmp_path: Path) -> None:
    folders(tmp_path)
    report = check_images(splits(tmp_path), LeakTolerance())
    assert report.findings == []
    train = next(s for s in report.splits if s.name == "train")
    cat, dog = train.classes["cat"], train.classes["dog"]
    assert (cat.files, dog.files) == (3, 2)
    assert (cat.widths.min, cat.widths.percentile(0.5), cat.widths.max) == (20, 32, 64)
    assert (cat.heights.min, cat.heights.max) == (16, 48)
    assert cat.modes == {"RGB": 1, "L": 1, "RGBA": 1} and dog.modes == {"P": 1, "RGB": 1}
    assert cat.formats == {"PNG": 2, "JPEG": 1}


def test_end_to_end_text_and_json(tmp_path: Path) -> None:
    manifest = folders(tmp_path)
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "images (width and height" in result.stdout and "RGBA 1" in result.stdout
    payload = json.loads(run_cli("data", "check", str(manifest), "--format", "json").stdout)
    assert payload["images"]["train"]["cat"]["files"] == 3
    assert payload["images"]["train"]["dog"]["modes"] == {"P": 1, "RGB": 1}
    assert payload["categories"]["test"]["counts"] == {"cat": 1, "dog": 1}


def test_unreadable_truncated_and_non_image_files_are_errors(tmp_path: Path) -> None:
    folders(tmp_path)
    (tmp_path / "train/cat/notes.txt").write_text("not an image")
    whole = (tmp_path / "train/cat/a.png").read_bytes()
    (tmp_path / "train/dog/cut.png").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "train/dog/empty.png").write_bytes(b"")
    save(tmp_path / "train/dog/icon.png", (16, 16), "RGB", 12, "ICO")  # Pillow reads ICO; we don't
    report = check_images(splits(tmp_path), LeakTolerance())
    bad = by_rule(report.findings, "data.image-unreadable")
    named = sorted(Path(f.path).name for f in bad)
    assert named == ["cut.png", "empty.png", "icon.png", "notes.txt"]
    assert all(f.severity == "error" for f in bad)
    assert "format read here (PNG, JPEG" in next(f for f in bad if "icon" in f.path).message
    train = next(s for s in report.splits if s.name == "train")
    assert train.bad == 4 and train.classes["dog"].files == 2


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    folders(tmp_path)
    os.symlink(tmp_path / "train/cat/a.png", tmp_path / "train/dog/link.png")
    os.symlink(tmp_path / "eval/cat", tmp_path / "train/bird")
    outside = save(tmp_path.parent / f"{tmp_path.name}-outside.png", (8, 8), "RGB", 99)
    os.symlink(outside, tmp_path / "train/cat/outside.png")
    report = check_images(splits(tmp_path), LeakTolerance())
    links = by_rule(report.findings, "data.image-symlink")
    assert sorted(Path(f.path).name for f in links) == ["bird", "link.png", "outside.png"]
    train = next(s for s in report.splits if s.name == "train")
    assert "bird" not in train.classes and train.classes["dog"].files == 2


def test_special_files_and_files_outside_a_class(tmp_path: Path) -> None:
    folders(tmp_path)
    os.mkfifo(tmp_path / "train/cat/pipe.png")  # a naive open() would block here
    save(tmp_path / "train/loose.png", (8, 8), "RGB", 10)
    report = check_images(splits(tmp_path), LeakTolerance())
    assert [Path(f.path).name for f in by_rule(report.findings, "data.image-special")] == [
        "pipe.png"
    ]
    assert [Path(f.path).name for f in by_rule(report.findings, "data.image-no-class")] == [
        "loose.png"
    ]


def png_header(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b""))
        + (chunk(b"IEND", b""))
    )


def test_decompression_bombs_are_findings_not_crashes(tmp_path: Path) -> None:
    folders(tmp_path)
    (tmp_path / "train/cat/bomb.png").write_bytes(png_header(100_000, 100_000))  # > 2x limit
    (tmp_path / "train/cat/big.png").write_bytes(png_header(10_000, 10_000))  # > 1x limit
    report = check_images(splits(tmp_path), LeakTolerance())
    bombs = sorted(Path(f.path).name for f in by_rule(report.findings, "data.image-bomb"))
    assert bombs == ["big.png", "bomb.png"]


def test_oversized_files_are_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders(tmp_path)
    monkeypatch.setattr(images_mod, "MAX_FILE_BYTES", 200)
    report = check_images(splits(tmp_path), LeakTolerance())
    large = by_rule(report.findings, "data.image-too-large")
    assert large and all("over 200" in f.message for f in large)


def test_duplicate_across_train_and_test_is_a_leak(tmp_path: Path) -> None:
    manifest = folders(tmp_path)
    (tmp_path / "test/dog/copy.png").write_bytes((tmp_path / "train/dog/d.png").read_bytes())
    (tmp_path / "eval/cat/copy.jpg").write_bytes((tmp_path / "train/cat/b.jpg").read_bytes())
    report = check_images(splits(tmp_path), LeakTolerance())
    dups = {f.extra["with"] + "/" + f.extra["split"]: f for f in by_rule(
        report.findings, "data.image-duplicate")}  # fmt: skip
    assert dups["test/train"].severity == "error"
    assert "test:dog/copy.png = train:dog/d.png" in dups["test/train"].message
    assert dups["eval/train"].severity == "warning"
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 1 and "data.image-duplicate" in result.stdout


def test_duplicates_with_a_sealed_split_and_within_a_split(tmp_path: Path) -> None:
    folders(tmp_path)
    (tmp_path / "eval/dog/copy.png").write_bytes((tmp_path / "test/dog/i.png").read_bytes())
    (tmp_path / "train/cat/again.png").write_bytes((tmp_path / "train/cat/a.png").read_bytes())
    (tmp_path / "train/cat/d.png").write_bytes((tmp_path / "train/dog/d.png").read_bytes())
    report = check_images(splits(tmp_path, sealed=True), LeakTolerance())
    dups = {(f.extra["with"], f.extra["split"]): f.severity
            for f in by_rule(report.findings, "data.image-duplicate")}  # fmt: skip
    assert dups == {("test", "eval"): "error", ("train", "train"): "warning"}
    (two,) = by_rule(report.findings, "data.image-two-classes")
    assert two.severity == "error" and "the same image as cat/d.png" in two.message
    assert two.path.endswith("train/dog/d.png")


def test_without_pillow_images_cannot_be_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders(tmp_path)
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL raises ImportError
    report = check_images(splits(tmp_path), LeakTolerance())
    assert len(report.findings) == 3
    assert all(f.severity == "error" and "cannot judge images" in f.message
               for f in report.findings)  # fmt: skip


def test_an_image_entry_that_is_not_a_folder_is_unusable_input(tmp_path: Path) -> None:
    manifest = folders(tmp_path)
    (tmp_path / "flat.png").write_bytes((tmp_path / "train/cat/a.png").read_bytes())
    manifest.write_text(MANIFEST.format(sealed="false").replace("path: eval,", "path: flat.png,"))
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 2 and "is not a folder" in result.stderr
    assert "Traceback" not in result.stderr


def test_deeply_nested_folders_do_not_exhaust_the_stack(tmp_path: Path) -> None:
    folders(tmp_path)
    deep = tmp_path / "train/cat" / "/".join(["d"] * 700)
    save(deep / "deep.png", (8, 8), "RGB", 11)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # a walk that recursed per folder level would fail here
    try:
        report = check_images(splits(tmp_path), LeakTolerance())
    finally:
        sys.setrecursionlimit(limit)
    assert report.findings == []
    assert next(s for s in report.splits if s.name == "train").classes["cat"].files == 4
