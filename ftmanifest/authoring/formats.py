"""Reading a source file as a mapping, and telling a data file's format from its content.

Layer: edges - authoring (reads files, through ``untrusted.read_untrusted``: a FIFO
never blocks, a huge file is refused).  YAML is parsed with PyYAML's safe
loader, JSON with the standard parser; anything that is not a mapping is
refused with the file, what was expected and what was found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.untrusted import read_untrusted

CONFIG_LIMIT = 16 << 20
SNIFF_BYTES = 64 << 10
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})


def read_bytes(path: Path, what: str) -> bytes:
    try:
        return read_untrusted(
            path, limit=CONFIG_LIMIT, what=what, hint=f"name the {what} file itself"
        )
    except FileNotFoundError:
        raise InputNotFoundError(
            f"{what} not found", path=str(path), hint="check the path given to --from"
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot read the {what}: {exc.strerror or exc}",
            path=str(path),
            hint="check the path and its permissions",
        ) from None


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The file's top-level mapping (YAML for .yaml/.yml, else JSON)."""
    raw = read_bytes(path, what)
    try:
        text = raw.decode("utf-8-sig")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(
            f"the {what} does not parse",
            path=str(path),
            expected="YAML" if path.suffix.lower() in (".yaml", ".yml") else "JSON",
            observed=str(exc).splitlines()[0][:160],
            hint="fix the file, or check --from names the config and not another file",
        ) from None
    except Exception as exc:  # yaml.YAMLError, without importing yaml at the top
        raise InputError(
            f"the {what} does not parse",
            path=str(path),
            expected="YAML",
            observed=" ".join(str(exc).split())[:160],
            hint="fix the file, or check --from names the config and not another file",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"the {what} is not a mapping of keys",
            path=str(path),
            expected="a mapping (key: value) at the top level",
            observed=type(data).__name__ if data is not None else "an empty document",
            hint="name the config file itself with --from",
        )
    return {str(k): v for k, v in data.items()}


_KIND_NAMES = {str: "text", list: "a list", dict: "a mapping", int: "an integer",
               float: "a number", bool: "true or false"}  # fmt: skip


def expect(cfg: dict[str, Any], path: Path, kinds: dict[str, tuple[type, ...]]) -> None:
    """Refuse a config whose key holds a value of a kind its tool never reads there
    (``base_model: [a, b]``): the file, the key, what was expected and found."""
    for key, allowed in kinds.items():
        value = cfg.get(key)
        if value is None or (isinstance(value, allowed) and not isinstance(value, bool)):
            continue
        expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in allowed)
        observed = f"{_KIND_NAMES.get(type(value), type(value).__name__)} {value!r}"
        raise InputError(
            f"{key} is not {expected}",
            path=str(path),
            field=key,
            expected=expected,
            observed=observed[:160],
            hint=f"fix {key} in {path.name} (see its tool's config reference)",
        )


def find(config: Path, name: str) -> Path | None:
    """``name`` as a tool run beside ``config``, or from here, would open it."""
    for folder in (config.parent, Path.cwd()):
        candidate = folder / name
        if candidate.exists():
            return candidate
    return None


def data_format(path: Path) -> str:
    """jsonl, json, csv, tsv, parquet, text, images or other, from the bytes."""
    if path.is_dir():
        files = [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")]
        if files and all(p.suffix.lower() in IMAGE_SUFFIXES for p in files):
            return "images"
        kinds = {data_format(p) for p in files[:64]}
        return kinds.pop() if len(kinds) == 1 else "other"
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if head.startswith(b"PAR1"):
        return "parquet"
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return "images"
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not only a character cut at the sniff's end
            return "other"
        text = head[: exc.start].decode("utf-8-sig")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        first = stripped.splitlines()[0]
        try:
            json.loads(first)
            return "jsonl"
        except ValueError:
            return "json"
    first_line = text.splitlines()[0] if text else ""
    if "\t" in first_line and path.suffix.lower() in (".tsv", ".tab", ".txt"):
        return "tsv"
    if "," in first_line and path.suffix.lower() == ".csv":
        return "csv"
    return "text"
