"""Image classification folders (``format: images``): classes, sizes, modes, duplicates.

Layer: judging rooms - data (edge: reads the files; Pillow is imported inside
``check_images``).  An entry's folder holds one sub-folder per class; every file under a
class folder (at any depth) is one image of that class.

Fail closed, each an **error** finding naming the file: a symlink (never
followed), a special file (FIFO, device, socket), a file over
``MAX_FILE_BYTES``, a file outside any class folder, a file Pillow cannot
identify as one of ``FORMATS`` or ``verify``, an image over ``MAX_PIXELS`` (a decompression bomb:
judged from the header, never decoded); and the whole entry when Pillow is
not installed ("cannot judge images").  Only headers are parsed (``Image.open``
reads size and mode from the header; ``verify`` checks the file's structure
without decoding pixels), from bytes read once through an ``O_NOFOLLOW`` open.

Duplicates by content digest (sha256 of the file's bytes): the same image in
two splits counts against ``data_checks.tolerance`` for that pair, as text
duplicates do (default: any between train and test, or with a sealed split,
is an **error**; others a warning); the same image under two classes of one
split is an **error** (contradictory labels); repeats within a class count
against the within-split tolerance.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.data.leak_report import ROLE_ORDER
from ftmanifest.data.stats import Histogram
from ftmanifest.findings import Finding

MAX_FILE_BYTES = 64 << 20
MAX_PIXELS = 89_478_485  # Pillow's own default MAX_IMAGE_PIXELS (about 0.25 GiB of RGBA / 3)
EXAMPLES = 5  # duplicate pairs named per split pair
FORMATS = ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP", "PPM")  # JPEG opens MPO too
"""What training code reads (torchvision's ImageFolder extensions); any other format
Pillow could parse (EPS, which loads through Ghostscript; PSD; ICO...) is not tried."""
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)


@dataclass
class ClassStats:
    files: int = 0
    widths: Histogram = field(default_factory=Histogram)
    heights: Histogram = field(default_factory=Histogram)
    modes: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)


@dataclass
class ImageSplit:
    name: str
    role: str
    path: str
    classes: dict[str, ClassStats] = field(default_factory=dict)
    bad: int = 0  # files that are not a readable image


@dataclass
class ImageReport:
    splits: list[ImageSplit]
    findings: list[Finding]
    duplicates: dict[tuple[str, str], int]  # (split a, split b) -> images shared


class _Bad(Exception):
    def __init__(self, rule: str, why: str) -> None:
        super().__init__(why)
        self.rule, self.why = rule, why


def _error(split: Any, rule: str, rel: str, message: str, hint: str) -> Finding:
    return Finding(
        kind="data",
        rule=rule,
        severity="error",
        path=str(Path(split.path) / rel),
        message=f"{split.name}: {rel}: {message}",
        expected="a readable image file",
        observed=message,
        hint=hint,
        extra={"split": split.name},
    )


def _walk(root: Path) -> Iterator[tuple[str, os.DirEntry[str] | OSError]]:
    """Every entry under ``root`` (relative path, entry), in sorted order, links not
    followed; a folder that cannot be listed comes as (its path, the error).  A stack,
    not recursion: a folder nested thousands deep cannot exhaust Python's stack."""
    stack: list[str] = [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(root / rel if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield rel, exc
            continue
        folders = []
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                folders.append(path)
            else:
                yield path, e
        stack.extend(reversed(folders))


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise _Bad("data.image-symlink", "a symlink (not followed)") from None
        raise _Bad("data.image-unreadable", exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _Bad("data.image-special", "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise _Bad("data.image-too-large", f"{st.st_size} bytes, over {MAX_FILE_BYTES}")
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Bad("data.image-too-large", f"grew past {MAX_FILE_BYTES} bytes while read")
    return data


def _header(image: Any, data: bytes, formats: tuple[str, ...]) -> tuple[int, int, str, str]:
    """(width, height, mode, format) from the header, the structure verified."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a hostile file's warnings are not ours to print
        warnings.simplefilter("error", image.DecompressionBombWarning)
        try:
            with image.open(io.BytesIO(data), formats=formats) as im:
                width, height = im.size
                mode, fmt = im.mode, im.format or "?"
                if width * height > MAX_PIXELS:
                    raise _Bad("data.image-bomb", f"{width}x{height} pixels, over {MAX_PIXELS}")
                im.verify()
        except _Bad:
            raise
        except (image.DecompressionBombError, image.DecompressionBombWarning) as exc:
            raise _Bad("data.image-bomb", str(exc)[:200]) from None
        except image.UnidentifiedImageError:
            why = "not an image in a format read here (" + ", ".join(FORMATS) + ")"
            raise _Bad("data.image-unreadable", why) from None
        except Exception as exc:  # Pillow raises many types on a bad file; all mean unreadable
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise _Bad("data.image-unreadable", f"not a readable image: {why}") from None
    return width, height, mode, fmt


def _pair_tolerance(a: Any, b: Any, tolerance: Any) -> Any:
    if a is not b and (a.sealed or b.sealed):
        return tolerance.sealed
    kinds = {a.kind, b.kind}
    if a is b:
        return tolerance.within_train if a.kind == "train" else tolerance.within_eval
    if kinds == {"train", "test"}:
        return tolerance.train_test
    if kinds == {"train", "eval"}:
        return tolerance.train_eval
    if kinds == {"eval", "test"}:
        return tolerance.eval_test
    return tolerance.within_eval  # eval vs baseline-eval and the like


def check_images(splits: Sequence[Any], tolerance: Any) -> ImageReport:
    """Read every image split (``leak_report.Split`` with format images) once."""
    try:
        from PIL import Image
    except ImportError:
        missing = [
            Finding(
                kind="data",
                rule="data.images-unjudged",
                severity="error",
                path=str(s.path),
                message=f"{s.name}: cannot judge images: Pillow is not installed",
                expected="Pillow importable",
                observed="ImportError",
                hint="pip install 'ftmanifest[ml]' (or pillow)",
            )
            for s in splits
        ]
        return ImageReport([ImageSplit(s.name, s.role, str(s.path)) for s in splits], missing, {})
    Image.init()
    formats = tuple(f for f in FORMATS if f in Image.OPEN)  # WEBP, TIFF: only when built in
    findings: list[Finding] = []
    first: dict[bytes, tuple[Any, str, str]] = {}  # sha256 -> (split, class, relative path)
    shared: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], list[str]] = {}
    out = []
    for split in sorted(splits, key=lambda s: ROLE_ORDER[s.role]):
        result = ImageSplit(split.name, split.role, str(split.path))
        out.append(result)
        root = Path(split.path)
        if not root.is_dir():
            findings.append(
                _error(
                    split,
                    "data.image-folder",
                    ".",
                    "not a folder",
                    "point the entry at a folder with one sub-folder per class",
                )
            )
            continue
        for rel, entry in _walk(root):
            cls = rel.split("/", 1)[0] if "/" in rel else None
            if isinstance(entry, OSError):
                result.bad += 1
                why = f"cannot list the folder: {entry.strerror or entry}"
                fix = "make it readable, or remove it"
                findings.append(_error(split, "data.image-unreadable", rel or ".", why, fix))
                continue
            if entry.is_symlink():
                findings.append(
                    _error(
                        split,
                        "data.image-symlink",
                        rel,
                        "a symlink (not followed)",
                        "replace the link with the file itself",
                    )
                )
                continue
            if cls is None:
                findings.append(
                    _error(
                        split,
                        "data.image-no-class",
                        rel,
                        "outside any class folder",
                        "move it into its class's folder, or out of the entry",
                    )
                )
                continue
            try:
                data = _read(root / rel)
                width, height, mode, fmt = _header(Image, data, formats)
            except _Bad as bad:
                result.bad += 1
                findings.append(
                    _error(
                        split, bad.rule, rel, bad.why, "remove or replace the file, then re-lock"
                    )
                )
                continue
            stats = result.classes.setdefault(cls, ClassStats())
            stats.files += 1
            stats.widths.add(width)
            stats.heights.add(height)
            stats.modes[mode] += 1
            stats.formats[fmt] += 1
            digest = hashlib.sha256(data).digest()  # 32 bytes per image kept, not the hex
            seen = first.get(digest)
            if seen is None:
                first[digest] = (split, cls, rel)
                continue
            other, other_cls, other_rel = seen
            if other is split and other_cls != cls:
                findings.append(
                    _error(
                        split,
                        "data.image-two-classes",
                        rel,
                        f"the same image as {other_rel} under another class",
                        "keep it in one class folder",
                    )
                )
                continue
            key = (other.name, split.name)
            shared[key] += 1
            examples.setdefault(key, [])
            if len(examples[key]) < EXAMPLES:
                examples[key].append(f"{other.name}:{other_rel} = {split.name}:{rel}")
    by_name = {s.name: s for s in splits}
    for (a, b), n in sorted(shared.items()):
        allowed = _pair_tolerance(by_name[a], by_name[b], tolerance).exact
        refused = allowed is not None and n > allowed
        pair = f"{b} (itself)" if a == b else f"{b} vs {a}"
        findings.append(
            Finding(
                kind="data",
                rule="data.image-duplicate",
                severity="error" if refused else "warning",
                path=str(by_name[b].path),
                message=f"{pair}: {n} images are byte-for-byte the same: "
                + "; ".join(examples[(a, b)]),
                expected=f"<= {allowed} shared" if allowed is not None else "any (tolerated)",
                observed=f"{n} shared",
                extra={"split": b, "with": a},
                hint="remove the copies from one split, then re-lock",
            )
        )
    return ImageReport(out, findings, dict(shared))
