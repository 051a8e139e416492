"""Open zip archives (torch checkpoints, npz) and legacy torch tars for the scanner.

Layer: judging rooms - edge of the scanner, under ``binary``.  ``torch.load`` reads
``<top>/data.pkl`` by name and ``numpy.load`` unpickles any npz member that
starts with the npy magic (``npz['x']`` opens ``x.npy`` or ``x``), so every
member is judged: named pickles and npy members as such, any other member by
its bytes (a pickle or compressed pickle hiding as a storage is still found;
tensor bytes are data).  Zip structure is checked because readers disagree:
torch's miniz reader and Python's ``zipfile`` each take sizes from the central
directory but may differ on duplicates, and neither promises to check a CRC, so
a duplicate name, a local header that disagrees with the directory, or a bad
CRC-32 is an error - what we scanned may not be what gets loaded.  The legacy
``torch.save`` tar (``storages``, ``tensors``, ``pickle``; see
``torch/serialization.py`` ``legacy_load``) is walked pickle by pickle, its
raw tensor bytes skipped by the sizes it records.
"""

from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.artifacts.keras_model import is_keras_archive, judge_config
from ftmanifest.scan.artifacts.pickle_ops import CHUNK, Import
from ftmanifest.scan.unscanned import malformed

if TYPE_CHECKING:
    from ftmanifest.scan.artifacts.binary import Ctx

_ZIP_ERRORS = (
    zipfile.BadZipFile,
    EOFError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    OverflowError,
)
_LOCAL = struct.Struct("<4s5H3L2H")
_ELEMENT_SIZE = {
    **dict.fromkeys(("Double", "Long", "ComplexFloat"), 8),
    **dict.fromkeys(("Float", "Int", "QInt32"), 4),
    **dict.fromkeys(("Half", "BFloat16", "Short"), 2),
    **dict.fromkeys(("Char", "Byte", "Bool", "QInt8", "QUInt8", "QUInt4x2", "QUInt2x4"), 1),
    "ComplexDouble": 16,
}


def scan_zip(ctx: Ctx, fmt: str) -> list[Finding]:
    from ftmanifest.scan.unscanned import part_not_scanned

    where = ctx.where
    raw = open_binary(ctx.path)  # one reader: zipfile seeks before each read it makes
    try:
        zf = zipfile.ZipFile(raw)
    except (*_ZIP_ERRORS, LookupError) as exc:  # e.g. "zip file version 6.4"
        raw.close()
        return [malformed(where, "zip.unreadable", f"cannot open archive: {exc}")]
    out: list[Finding] = []
    with raw, zf:
        # not ZipInfo.is_dir(): it indexes filename[-1] and raises on an empty name
        infos = [i for i in zf.infolist() if not i.filename.endswith("/")]
        for name, n in Counter(i.filename for i in infos).items():
            if n > 1:
                msg = f"member {name!r} appears {n} times; loaders may take either"
                out.append(malformed(where, "zip.duplicate-member", msg, name))
        data_pkls = [i.filename for i in infos if i.filename.rsplit("/", 1)[-1] == "data.pkl"]
        if len(data_pkls) > 1:
            msg = f"archive holds {len(data_pkls)} data.pkl members; loaders read only one"
            out.append(malformed(where, "torch.multiple-data-pkl", msg))
        if len(infos) > ctx.limits.max_members:
            out.append(
                part_not_scanned(where, f"archive has over {ctx.limits.max_members} members")
            )
            infos = infos[: ctx.limits.max_members]
        # data.pkl first: the storages it names are raw bytes torch never unpickles
        infos.sort(key=lambda i: i.filename.rsplit("/", 1)[-1] != "data.pkl")
        folders = {name.rsplit("/", 1)[0] + "/" if "/" in name else "" for name in data_pkls}
        keras = fmt == "zip" and is_keras_archive([i.filename for i in infos])
        size = raw.seek(0, io.SEEK_END)  # a held copy has no file descriptor to stat
        for info in infos:
            if placed_outside(info, size):
                out.append(_outside(where, info, size))
                continue
            problem = local_header_problem(raw, info)
            if problem:
                out.append(malformed(where, "zip.header-mismatch", problem, info.filename))
            if info.filename in ctx.storages or (keras and info.filename.endswith(".weights.h5")):
                out += _crc(ctx, zf, info)  # tensor bytes: data, read whole, never judged
                continue
            if keras and info.filename == "config.json":
                out += _keras_config(ctx, zf, info)
            if fmt == "torch-zip" and _in_data(info.filename, folders):
                out.append(_unreferenced(where, info.filename))
            out += _member(ctx, zf, info, fmt)
    return out


def placed_outside(info: zipfile.ZipInfo, size: int) -> bool:
    """Whether the central directory puts the member's local header outside the
    archive's ``size`` bytes: zipfile's seek there fails (EINVAL, or OverflowError past
    a C long), so the member is never read."""
    return not 0 <= info.header_offset < size


def _outside(where: str, info: zipfile.ZipInfo, size: int) -> Finding:
    """A member whose local header the central directory places outside the file."""
    return malformed(
        where,
        "zip.header-mismatch",
        f"the central directory puts the local header at offset {info.header_offset}, "
        "outside the file",
        info.filename,
        expected=f"an offset from 0 to {size - 1} (the file's {size} bytes)",
        observed=str(info.header_offset),
        hint="no loader can read this member: re-save the archive with the tool that made "
        "it (torch.save, numpy.savez, keras) and find out what rewrote its directory",
    )


def _keras_config(ctx: Ctx, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> list[Finding]:
    from ftmanifest.scan.unscanned import part_not_scanned

    if info.file_size > ctx.limits.max_inflated_bytes:
        return [part_not_scanned(ctx.where, "config.json is over the size cap", info.filename)]
    try:
        raw = zf.read(info)
    except _ZIP_ERRORS as exc:
        return _unreadable(ctx, info.filename, exc)
    return judge_config(ctx.where, info.filename, raw)


def _in_data(name: str, folders: set[str]) -> bool:
    return any(name.startswith(folder + "data/") for folder in folders)


def _unreferenced(where: str, name: str) -> Finding:
    return Finding(
        kind="malformed",
        rule="torch.unreferenced-member",
        message=f"{name} is in the storage folder but no data.pkl names it; "
        "torch.load never reads it (judged below as whatever it holds)",
        path=where,
        field=name,
        severity="warning",
        expected="only the storages data.pkl names",
        observed=name,
        hint="re-save the checkpoint with torch.save; find out what put this member there",
        extra={"member": name},
    )


def _crc(ctx: Ctx, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> list[Finding]:
    """A member read whole, for zipfile to check its CRC-32: [] or the error it raised."""
    try:
        with zf.open(info) as whole:
            while whole.read(CHUNK):
                pass
    except _ZIP_ERRORS as exc:
        return _unreadable(ctx, info.filename, exc)
    return []


def _unreadable(ctx: Ctx, name: str, exc: Exception) -> list[Finding]:
    from ftmanifest.scan.unscanned import part_not_scanned

    if isinstance(exc, zipfile.BadZipFile):
        return [malformed(ctx.where, "zip.bad-member", f"member {name}: {exc}", name)]
    why = f"cannot read member {name}: {exc}"
    return [part_not_scanned(ctx.where, why, name, "scan.unreadable")]


def _member(ctx: Ctx, zf: zipfile.ZipFile, info: zipfile.ZipInfo, fmt: str) -> list[Finding]:
    from ftmanifest.scan.unscanned import part_not_scanned

    name = info.filename
    if info.file_size > ctx.limits.max_inflated_bytes:
        return [part_not_scanned(ctx.where, f"member {name} is over the size cap", name)]
    kind = None
    if name.endswith(".pkl"):
        kind = "pickle"
    elif name.endswith(".npy") and fmt == "npz":
        kind = "npy"

    def opener() -> IO[bytes]:
        return io.BufferedReader(zf.open(info), buffer_size=CHUNK)  # type: ignore[type-var]

    try:
        # a plain zip's text members are text-scanned, its unknown ones not-scanned
        out = ctx.content(opener, name, kind=kind, optional=kind is None and fmt != "zip")
    except _ZIP_ERRORS as exc:
        return _unreadable(ctx, name, exc)
    return _crc(ctx, zf, info) or out


def local_header_problem(raw: IO[bytes], info: zipfile.ZipInfo) -> str | None:
    """How the member's local file header disagrees with the central directory."""
    raw.seek(info.header_offset)
    head = raw.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        return f"no local file header at offset {info.header_offset}"
    _, _, flags, method, _, _, crc, csize, usize, nlen, elen = _LOCAL.unpack(head)
    raw_name = raw.read(nlen)
    extra = raw.read(elen)
    name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", "replace")
    if name != info.orig_filename:
        return f"local header names {name!r}, the directory {info.orig_filename!r}"
    if method != info.compress_type:
        return f"local header compression {method}, the directory {info.compress_type}"
    if flags & 0x08:  # sizes and CRC follow the data; zipfile checks the CRC
        return None
    if 0xFFFFFFFF in (csize, usize):
        usize, csize = _zip64_sizes(extra, usize, csize)
    seen = (crc, csize, usize)
    want = (info.CRC, info.compress_size, info.file_size)
    if seen != want:
        return f"local header (crc, sizes) {seen} differ from the directory's {want}"
    return None


def _zip64_sizes(extra: bytes, usize: int, csize: int) -> tuple[int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 1:
            values = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
        pos += 4 + size
    return usize, csize


def is_tar(path: Path) -> bool:
    with open_binary(path) as fh:
        block = fh.read(512)
    return len(block) == 512 and block[257:262] == b"ustar"


def scan_tar(ctx: Ctx) -> list[Finding]:
    from ftmanifest.scan.unscanned import part_not_scanned

    out: list[Finding] = []
    try:
        with open_binary(ctx.path) as raw, tarfile.open(fileobj=raw, mode="r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            for name, n in Counter(m.name for m in members).items():
                if n > 1:
                    msg = f"member {name!r} appears {n} times; loaders may take either"
                    out.append(malformed(ctx.where, "tar.duplicate-member", msg, name))
            for m in members:

                def opener(m: tarfile.TarInfo = m) -> IO[bytes]:
                    fh = tar.extractfile(m)
                    assert fh is not None
                    return fh

                if m.name in ("storages", "tensors"):
                    with opener() as fh:
                        out += _legacy_records(ctx, fh, m.name)
                else:
                    # a legacy torch tar's raw bytes are in storages/tensors (above):
                    # every other member is judged as what it holds, never skipped
                    kind = "pickle" if m.name in ("pickle", "sys_info") else None
                    out += ctx.content(opener, m.name, kind=kind)
    except (tarfile.TarError, EOFError) as exc:
        return out + [
            part_not_scanned(ctx.where, f"tar unreadable: {exc}", None, "scan.unreadable")
        ]
    return out


def _legacy_records(ctx: Ctx, fh: IO[bytes], name: str) -> list[Finding]:
    """``storages``/``tensors``: a count pickle, then per record a pickle and raw bytes."""
    from ftmanifest.scan.unscanned import part_not_scanned

    out: list[Finding] = []
    while _more(fh):
        found, res = ctx.pickles(fh, name, 1)
        out += found
        if not res.stopped:
            break
        value = res.value
        if not (isinstance(value, tuple) and len(value) == 3):
            continue  # the count, or the storage views list
        if name == "storages":
            kind = value[2]
            stem = kind.name.removesuffix("Storage") if isinstance(kind, Import) else ""
            if stem not in _ELEMENT_SIZE:
                out.append(part_not_scanned(ctx.where, "storage of unknown element size", name))
                break
            raw = fh.read(8)
            if len(raw) < 8:
                out.append(malformed(ctx.where, "torch.truncated", "storage size cut", name))
                break
            (numel,) = struct.unpack("<q", raw)
            if not _skip(fh, numel * _ELEMENT_SIZE[stem]):
                out.append(malformed(ctx.where, "torch.truncated", "storage bytes cut", name))
                break
        else:
            raw = fh.read(8)
            (ndim,) = struct.unpack("<i", raw[:4]) if len(raw) == 8 else (-1,)
            if ndim < 0 or not _skip(fh, 16 * ndim + 8):
                out.append(malformed(ctx.where, "torch.truncated", "tensor record cut", name))
                break
    return out


def _more(fh: IO[bytes]) -> bool:
    peek = getattr(fh, "peek", None)
    return bool(peek(1)) if peek is not None else True


def _skip(fh: IO[bytes], n: int) -> bool:
    while n > 0:
        got = len(fh.read(min(n, CHUNK)))
        if not got:
            return False
        n -= got
    return True
