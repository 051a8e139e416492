"""The child that reads one HDF5 file's metadata for ``hdf5_model`` (run by path).

Layer: judging rooms - a process of its own; imports the standard library, numpy and
h5py only.  Arguments: the descriptor to read (with ``pread``, so the parent's offset is
untouched), an address-space limit, a string budget.  The parent sets
``HDF5_PLUGIN_PATH`` to a path that holds no plugin, so no filter's native code is
loaded.  Output: one JSON object on stdout.
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
from typing import Any

BUILTIN_FILTERS = {1, 2, 3, 4, 5, 6, 32000}  # deflate shuffle fletcher32 szip nbit scaleoffset lzf
KERAS_ATTRS = ("model_config", "training_config")


class Positional(io.RawIOBase):
    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd, self.pos = fd, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = os.pread(self.fd, len(buffer), self.pos)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: os.fstat(self.fd).st_size}
        self.pos = base[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos


class Report:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.out: dict[str, Any] = {
            "keras": {}, "strings": [], "external": [], "plugins": [], "unjudged": []
        }  # fmt: skip

    def unjudged(self, where: str, why: str) -> None:
        self.out["unjudged"].append([where, why])

    def text(self, where: str, value: object) -> None:
        value = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if len(value) > self.budget:
            self.unjudged(where, "past the string budget")
            return
        self.budget -= len(value)
        self.out["strings"].append([where, value])

    def strings(self, where: str, value: object, dtype: Any) -> bool:
        """Hand over the strings of a value of ``dtype``; False when it is not strings."""
        import h5py
        import numpy

        if h5py.check_string_dtype(dtype) is None and dtype.kind not in "SUO":
            return False
        if dtype.kind == "O" and h5py.check_string_dtype(dtype) is None:
            if h5py.check_vlen_dtype(dtype) is not None or h5py.check_ref_dtype(dtype) is not None:
                return False
        for item in numpy.asarray(value, dtype=object).ravel():
            if isinstance(item, (str, bytes)):
                self.text(where, item)
        return True

    def attrs(self, where: str, obj: Any) -> None:
        for key in obj.attrs:
            at = f"{where}@{key}"
            try:
                value = obj.attrs[key]
                dtype = obj.attrs.get_id(key).dtype
            except Exception as exc:  # noqa: BLE001 - libhdf5 raises many kinds on hostile bytes
                self.unjudged(at, f"attribute unreadable ({type(exc).__name__}: {exc})")
                continue
            if where == "/" and key in KERAS_ATTRS:
                raw = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                self.out["keras"][key] = raw
            if isinstance(value, (str, bytes)):
                self.text(at, value)
            elif not self.strings(at, value, dtype) and not plain(dtype):
                self.unjudged(at, f"attribute of type {dtype} is not judged")

    def dataset(self, name: str, obj: Any) -> None:
        if obj.is_virtual:
            files = sorted({src.file_name for src in obj.virtual_sources()})
            self.out["external"].append([name, "virtual dataset", files])
        if obj.external:
            files = sorted({str(entry[0]) for entry in obj.external})
            self.out["external"].append([name, "external storage", files])
        plist = obj.id.get_create_plist()
        for i in range(plist.get_nfilters()):
            code, _flags, _values, fname = plist.get_filter(i)
            if code not in BUILTIN_FILTERS:
                self.out["plugins"].append([name, int(code), fname.decode("latin-1")])
        dtype = obj.dtype
        if plain(dtype):
            return  # numbers: the payload is never read
        if obj.size * max(dtype.itemsize, 1) > self.budget:
            self.unjudged(name, f"dataset of {obj.size} items is past the string budget")
            return
        try:
            if not self.strings(name, obj[()], dtype):
                self.unjudged(name, f"dataset of type {dtype} is not judged")
        except Exception as exc:  # noqa: BLE001 - as above
            self.unjudged(name, f"dataset unreadable ({type(exc).__name__}: {exc})")


def plain(dtype: Any) -> bool:
    """Numbers, references, or records and arrays of them: no text in them."""
    import h5py

    if dtype.fields:
        return all(plain(field[0]) for field in dtype.fields.values())
    if h5py.check_ref_dtype(dtype) is not None:
        return True
    if h5py.check_string_dtype(dtype) is not None:
        return False
    vlen = h5py.check_vlen_dtype(dtype)
    if vlen is not None:
        return plain(vlen)
    if dtype.subdtype is not None:
        return plain(dtype.subdtype[0])
    return bool(dtype.kind in "biufc?mM")


def main(argv: list[str]) -> int:
    fd, limit, budget = int(argv[1]), int(argv[2]), int(argv[3])
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass  # a lower hard limit is already in place
    import h5py

    report = Report(budget)
    with h5py.File(io.BufferedReader(Positional(fd)), "r") as f:
        report.attrs("/", f)

        def visit(raw: bytes) -> None:
            name = raw.decode("utf-8", "replace")
            link = f.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                report.out["external"].append([name, "external link", [link.filename]])
                return
            if isinstance(link, h5py.SoftLink):
                return  # a name for an object inside the file, visited by its hard link
            obj = f.get(name)
            report.attrs(name, obj)
            if isinstance(obj, h5py.Dataset):
                report.dataset(name, obj)

        f.id.links.visit(visit)  # hard links only: external and soft links are not followed
    json.dump(report.out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
