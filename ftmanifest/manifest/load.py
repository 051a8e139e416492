"""Read a manifest file (YAML, JSON or TOML) into plain data with positions.

Layer: pure core - manifest (reads one file, judges nothing beyond syntax).  The result
keeps the line and column of every key so that later checks can name the
exact place of a problem.  This module reads the file (a regular file of at most
``MAX_BYTES``, UTF-8) and hands its text to the syntax its suffix names:
``yaml_syntax``, ``json_syntax`` or ``toml_syntax``, each of which returns the data
and the keys' positions within the shared ``limits``.

Refused, each with a location: files over ``MAX_BYTES``, non-UTF-8 bytes, NUL
characters; then, by the syntax, syntax errors, duplicate keys, alias expansion
beyond ``MAX_NODES``, nesting deeper than ``MAX_DEPTH``, non-string keys, NaN/infinity.
"""

from __future__ import annotations

import os

from ftmanifest.errors import InputNotFoundError, ManifestError
from ftmanifest.manifest.json_syntax import parse_json
from ftmanifest.manifest.toml_syntax import parse_toml
from ftmanifest.manifest.yaml_syntax import parse_yaml

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ftmanifest.location import Loc

MAX_BYTES = 16 << 20  # a model of ~25,000 listed files; limits.MAX_NODES binds first

_SUFFIX_FORMAT = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}


class Document:
    """A parsed manifest file: plain data plus where each key stands."""

    __slots__ = ("path", "format", "text", "data", "positions")

    def __init__(
        self,
        path: str,
        format: str,
        text: str,
        data: Any,
        positions: dict[Loc, tuple[int, int]] | None = None,
    ) -> None:
        self.path = path
        self.format = format
        self.text = text
        self.data = data
        self.positions = positions if positions is not None else {}

    def position(self, loc: Loc) -> tuple[int | None, int | None]:
        """1-based (line, column) of ``loc`` or of its nearest located parent."""
        probe = tuple(loc)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return (1, 1) if self.text else (None, None)


def detect_format(path: str) -> str:
    return _SUFFIX_FORMAT.get(os.path.splitext(path)[1].lower(), "yaml")


def read_document(path: str | Path) -> Document:
    """Read and parse ``path``; raise ``ManifestError`` with a location on failure."""
    name = os.fspath(path)
    try:
        raw = _read_regular(name)
    except FileNotFoundError:
        raise InputNotFoundError(
            "manifest not found",
            path=name,
            hint="check the path, or create one with `ftmanifest init`",
        ) from None
    except IsADirectoryError:
        raise ManifestError(
            "is a directory, not a manifest file",
            path=name,
            expected="a manifest file (.yaml, .yml, .json or .toml)",
            hint=f"name the manifest file(s) in it, e.g. {os.path.join(name, '*.yaml')}",
        ) from None
    except _NotRegular as exc:
        raise ManifestError(
            f"is {exc.kind}, not a regular file",
            path=name,
            expected="a manifest file",
            hint="save the manifest to a file and name that file",
        ) from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read the file: {exc.strerror or exc}",
            path=name,
            hint="check the path and its permissions",
        ) from None
    if len(raw) > MAX_BYTES:
        raise ManifestError(
            "file is too large for a manifest",
            path=name,
            expected=f"at most {MAX_BYTES} bytes",
            observed=f"more than {MAX_BYTES} bytes",
            hint="a manifest pins data by digest; it never embeds the data itself",
        )
    text = decode_utf8(raw, name)
    return parse_text(text, name, detect_format(name))


class _NotRegular(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def _read_regular(name: str) -> bytes:
    """At most ``MAX_BYTES + 1`` bytes of a regular file.  Opened without
    blocking and checked before reading, so a FIFO or a device never hangs
    the command (a FIFO's open would wait for a writer)."""
    import stat

    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(name)
        if not stat.S_ISREG(mode):
            kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device"}
            raise _NotRegular(next((k for test, k in kinds.items() if test(mode)), "a device"))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def decode_utf8(raw: bytes, name: str) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ManifestError(
            "file is not valid UTF-8",
            path=name,
            line=line,
            column=col,
            observed=f"byte 0x{raw[exc.start]:02x}",
            expected="UTF-8 text",
            hint="re-save the file as UTF-8",
        ) from None


def parse_text(text: str, name: str, fmt: str) -> Document:
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ManifestError("file contains a NUL character", path=name, line=line)
    parse = {"json": parse_json, "toml": parse_toml}.get(fmt, parse_yaml)
    data, positions = parse(text, name)
    return Document(name, fmt if fmt in ("json", "toml") else "yaml", text, data, positions)
