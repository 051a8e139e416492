"""Scan one binary artifact: pickles, torch archives, numpy files, safetensors.

Layer: edge of the scanner (opens files and zip members, streams them) over the
pure walkers in ``pickles``/``safetensors``.  Nothing is ever unpickled.  Called
by the scan engine with the format ``sniff.detect_format`` found; every defect,
cap or unreadable part becomes a finding - this function does not raise on bad
input.
"""

from __future__ import annotations

import ast
import io
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ftmanifest.findings import Finding
from ftmanifest.scan.pickle_allowlist import (
    HINT,
    fingerprint,
    judge,
    not_scanned,
    weights_finding,
)
from ftmanifest.scan.pickles import PickleWalker, is_flat_tensor_mapping
from ftmanifest.scan.safetensors import MAX_HEADER, check_safetensors

TextScanner = Callable[..., list[Finding]]
BINARY_FORMATS = frozenset({"safetensors", "pickle", "torch-zip", "torch-legacy", "npy", "npz"})
# A pickle in a file with one of these names pretends to be something safe.
PICKLE_FREE_SUFFIXES = frozenset({".safetensors", ".json", ".jsonl", ".txt", ".csv", ".gguf"})
LEGACY_PICKLES = 5  # magic, protocol, sys_info, main object, storage keys
NPY_MAX_HEADER = 1 << 20
IN_MEMORY = 64 << 20  # zip members up to this size are read whole


@dataclass(frozen=True)
class BinaryLimits:
    max_pickle_bytes: int = 2 << 30
    max_opcodes: int = 2_000_000
    max_header_bytes: int = MAX_HEADER
    max_members: int = 10_000


def scan_binary(
    path: Path,
    fmt: str,
    text_scanner: TextScanner | None,
    *,
    limits: BinaryLimits | None = None,
    allow: Iterable[str] = (),
) -> list[Finding]:
    """Findings for one file of a binary ``fmt`` (one of ``BINARY_FORMATS``)."""
    ctx = _Ctx(path, text_scanner, limits or BinaryLimits(), frozenset(allow))
    try:
        if fmt == "safetensors":
            return check_safetensors(
                path, text_scanner=text_scanner, max_header=ctx.limits.max_header_bytes
            )
        if fmt not in BINARY_FORMATS:
            return [
                not_scanned(
                    str(path), f"no binary scanner for format {fmt!r}", rule="scan.unknown-format"
                )
            ]
        out = _disguise(path, fmt)
        if fmt in ("pickle", "torch-legacy"):
            with open(path, "rb") as fh:
                out += ctx.pickles(fh, None, LEGACY_PICKLES if fmt == "torch-legacy" else 1)
        elif fmt == "npy":
            with open(path, "rb") as fh:
                out += ctx.npy(fh, None)
        else:
            out += ctx.archive(fmt)
        return out
    except OSError as exc:
        return [
            not_scanned(
                str(path), f"cannot read file: {exc.strerror or exc}", rule="scan.unreadable"
            )
        ]


def _disguise(path: Path, fmt: str) -> list[Finding]:
    if fmt == "npy" or path.suffix.lower() not in PICKLE_FREE_SUFFIXES:
        return []
    return [
        Finding(
            kind="unsafe-pickle",
            rule="pickle.disguised",
            message=f"file named {path.suffix} holds a {fmt} (pickle-based) payload",
            path=str(path),
            expected=f"a {path.suffix} file",
            observed=fmt,
            severity="error",
            hint=HINT,
            fingerprint=fingerprint("pickle.disguised", path.suffix, fmt),
        )
    ]


class _Ctx:
    def __init__(
        self, path: Path, scanner: TextScanner | None, limits: BinaryLimits, allow: frozenset[str]
    ) -> None:
        self.path, self.where, self.scanner = path, str(path), scanner
        self.limits, self.allow = limits, allow

    def _sink(self, member: str | None, out: list[Finding]) -> Callable[[int, str], None] | None:
        if self.scanner is None:
            return None
        scanner, where, seen, reported = self.scanner, self.where, set(), set()

        def sink(offset: int, text: str) -> None:
            if text in seen:
                return
            seen.add(text)
            for f in scanner(text, path=where, extra={"offset": offset, "member": member}):
                key = (offset, f.rule, f.fingerprint)  # overlapping pieces of one constant
                if key not in reported:
                    reported.add(key)
                    out.append(f)

        return sink

    def pickles(self, fh: IO[bytes], member: str | None, count: int) -> list[Finding]:
        """Walk ``count`` consecutive pickles (a legacy torch file has five)."""
        out: list[Finding] = []
        strings: list[Finding] = []
        sink = self._sink(member, strings)
        pos = 0
        flat = False
        for index in range(count):
            res = PickleWalker(
                fh,
                on_string=sink,
                max_bytes=self.limits.max_pickle_bytes,
                max_opcodes=self.limits.max_opcodes,
                base=pos,
            ).walk()
            pos = res.end
            out += judge(res, path=self.where, member=member, allow=self.allow, weights_check=False)
            if index == min(3, count - 1):
                flat = res.stopped and is_flat_tensor_mapping(res.value)
            if not res.stopped:
                break
        if flat and not out:
            out.append(weights_finding(self.where, member))
        return out + strings

    def npy(self, fh: IO[bytes], member: str | None) -> list[Finding]:
        """Parse an .npy header; an object dtype means a pickle follows."""
        try:
            descr = _npy_descr(fh)
        except ValueError as exc:
            return [_malformed(self.where, "npy.bad-header", str(exc), member)]
        if not _has_object(descr):
            return []
        return self.pickles(fh, member, 1)

    def archive(self, fmt: str) -> list[Finding]:
        out: list[Finding] = []
        try:
            zf = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, ValueError, EOFError) as exc:
            return [_malformed(self.where, "zip.unreadable", f"cannot open archive: {exc}")]
        with zf:
            infos = zf.infolist()
            suffix = ".npy" if fmt == "npz" else ".pkl"
            wanted = [i for i in infos if i.filename.endswith(suffix) and not i.is_dir()]
            if len(wanted) > self.limits.max_members:
                cap = self.limits.max_members
                out.append(not_scanned(self.where, f"archive has over {cap} {suffix} members"))
                wanted = wanted[:cap]
            names = Counter(i.filename for i in infos)
            for name, n in names.items():
                if n > 1:
                    out.append(
                        _malformed(
                            self.where,
                            "zip.duplicate-member",
                            f"member {name!r} appears {n} times",
                            name,
                        )
                    )
            data_pkls = [i.filename for i in infos if i.filename.rsplit("/", 1)[-1] == "data.pkl"]
            if len(data_pkls) > 1:
                out.append(
                    _malformed(
                        self.where,
                        "torch.multiple-data-pkl",
                        f"archive holds {len(data_pkls)} data.pkl members; loaders read only one",
                    )
                )
            for info in wanted:
                out += self._member(zf, info, fmt)
        return out

    def _member(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, fmt: str) -> list[Finding]:
        name = info.filename
        if info.file_size > self.limits.max_pickle_bytes:
            return [not_scanned(self.where, f"member {name} is over the size cap", name)]
        try:
            with zf.open(info) as member:
                # small members (every real data.pkl) are read whole: per-opcode reads
                # on a zip stream are slow; big ones stay streamed.
                fh: IO[bytes] = member
                if info.file_size <= IN_MEMORY:
                    fh = io.BytesIO(member.read(IN_MEMORY + 1))
                return self.npy(fh, name) if fmt == "npz" else self.pickles(fh, name, 1)
        except (
            zipfile.BadZipFile,
            zlib.error,
            EOFError,
            NotImplementedError,
            RuntimeError,
            ValueError,
        ) as exc:
            return [
                not_scanned(
                    self.where, f"cannot read member {name}: {exc}", name, "scan.unreadable"
                )
            ]


def _npy_descr(fh: IO[bytes]) -> Any:
    magic = fh.read(8)
    if len(magic) < 8 or not magic.startswith(b"\x93NUMPY"):
        raise ValueError("missing the \\x93NUMPY magic")
    major = magic[6]
    if major not in (1, 2, 3):
        raise ValueError(f"unknown npy version {major}.{magic[7]}")
    size_fmt = "<H" if major == 1 else "<I"
    raw = fh.read(struct.calcsize(size_fmt))
    if len(raw) < struct.calcsize(size_fmt):
        raise ValueError("truncated npy header")
    (hlen,) = struct.unpack(size_fmt, raw)
    if hlen > NPY_MAX_HEADER:
        raise ValueError(f"npy header of {hlen} bytes is over the cap")
    header = fh.read(hlen)
    if len(header) < hlen:
        raise ValueError("truncated npy header")
    try:
        text = header.decode("utf-8" if major == 3 else "latin-1")
        meta = ast.literal_eval(text)  # literals only: never evaluates code
    except (UnicodeDecodeError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError("npy header is not a Python literal") from None
    if not isinstance(meta, dict) or not {"descr", "fortran_order", "shape"} <= meta.keys():
        raise ValueError("npy header lacks descr/fortran_order/shape")
    return meta["descr"]


def _has_object(descr: Any, depth: int = 0) -> bool:
    """True when a dtype description holds an object field (pickled data follows)."""
    if depth > 64:
        return True
    if isinstance(descr, str):
        return descr.lstrip("|<>=").startswith("O")
    if isinstance(descr, list):
        return any(_has_object(f, depth + 1) for f in descr)
    if isinstance(descr, tuple) and len(descr) >= 2:
        return _has_object(descr[1], depth + 1)
    return False


def _malformed(where: str, rule: str, message: str, member: str | None = None) -> Finding:
    return Finding(
        kind="malformed",
        rule=rule,
        message=message + (f" in {member}" if member else ""),
        path=where,
        field=member,
        severity="error",
        extra={"member": member},
    )
