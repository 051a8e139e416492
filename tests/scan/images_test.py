"""Images are data; their metadata is text to scan.

Every image data set used to fail the scan (``not scanned: unknown binary``)
unless ``--allow-not-scanned`` waved every file through.  Images are built
with Pillow and opened with it: the clean ones pass, a token in a PNG text
chunk (plain or compressed), a JPEG comment or EXIF field, a GIF comment or
a WebP EXIF chunk is found.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

Image = pytest.importorskip("PIL.Image")
PngImagePlugin = pytest.importorskip("PIL.PngImagePlugin")

TOKEN = "ghp_" + "Mv8Tq2Lw6Ny4Bx0Cz9Rk7Hs5Jd3Fg1Pa8Qe2"


def _image() -> object:
    return Image.new("RGB", (8, 8), (40, 90, 160))


def _found(path: Path) -> list[tuple[str, str]]:
    return [(f.rule, f.severity) for f in scan_paths([path]).findings]


@pytest.mark.parametrize("suffix", ["png", "jpg", "gif", "webp", "bmp"])
def test_a_plain_image_is_clean(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"cat.{suffix}"
    _image().save(path)
    Image.open(path).load()
    assert _found(path) == []


@pytest.mark.parametrize("how", ["tEXt", "zTXt", "iTXt"])
def test_a_token_in_a_png_text_chunk_is_found(tmp_path: Path, how: str) -> None:
    info = PngImagePlugin.PngInfo()
    if how == "iTXt":
        info.add_itxt("Description", f"uploaded by {TOKEN}", zip=True)
    else:
        info.add_text("Comment", f"uploaded by {TOKEN}", zip=how == "zTXt")
    path = tmp_path / "cat.png"
    _image().save(path, pnginfo=info)
    assert Image.open(path).text  # Pillow reads the chunk back
    assert ("secret.github-pat", "error") in _found(path)


def test_a_token_in_jpeg_comment_or_exif_is_found(tmp_path: Path) -> None:
    commented = tmp_path / "a.jpg"
    _image().save(commented, comment=f"by {TOKEN}".encode())
    exif = Image.Exif()
    exif[0x010E] = f"by {TOKEN}"  # ImageDescription
    described = tmp_path / "b.jpg"
    _image().save(described, exif=exif)
    assert Image.open(described).getexif()[0x010E].endswith(TOKEN[-6:])
    for path in (commented, described):
        assert ("secret.github-pat", "error") in _found(path)


def test_a_token_in_a_gif_comment_or_webp_exif_is_found(tmp_path: Path) -> None:
    gif = tmp_path / "a.gif"
    _image().save(gif, comment=f"by {TOKEN}".encode())
    exif = Image.Exif()
    exif[0x010E] = f"by {TOKEN}"
    webp = tmp_path / "a.webp"
    _image().save(webp, exif=exif)
    for path in (gif, webp):
        assert ("secret.github-pat", "error") in _found(path), path


def test_a_truncated_image_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cat.png"
    _image().save(path)
    path.write_bytes(path.read_bytes()[:40])
    assert _found(path) == [("image.malformed", "error")]


def test_a_tiff_says_its_tags_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "scan.tiff"
    _image().save(path)
    assert _found(path) == [("image.metadata-not-read", "info")]


def test_a_pickle_named_like_an_image_is_disguised(tmp_path: Path) -> None:
    path = tmp_path / "cat.png"
    path.write_bytes(pickle.dumps([1, 2, 3]))
    assert ("pickle.disguised", "error") in _found(path)


@pytest.mark.parametrize(
    ("name", "data"),
    [("m.tflite", b"\x1c\0\0\0TFL3" + b"\0" * 32), ("a.7z", b"7z\xbc\xaf\x27\x1c" + b"\0" * 32)],
)  # fmt: skip
def test_a_model_format_not_judged_yet_says_so(tmp_path: Path, name: str, data: bytes) -> None:
    """Not "raise the cap" (no cap is involved) and never taken for text."""
    path = tmp_path / name
    path.write_bytes(data)
    (row,) = scan_paths([path]).findings
    assert (row.rule, row.severity, row.kind) == ("scan.not-judged", "error", "not-scanned")
    assert "does not judge it" in row.message and "cap" not in (row.hint or "")


@pytest.mark.parametrize("suffix", ["png", "gif"])
def test_bytes_after_the_image_end_are_named_and_scanned(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"cat.{suffix}"
    _image().save(path)
    with path.open("ab") as fh:
        fh.write(f"\nnotes: {TOKEN}\n".encode())
    Image.open(path).load()  # viewers do not mind
    found = _found(path)
    assert ("image.trailing-data", "warning") in found
    assert ("secret.github-pat", "error") in found
