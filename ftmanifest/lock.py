"""``lock``: fill in or refresh a manifest's pins from what is here, keeping comments.

Layer: edge (observes, then rewrites the file atomically).  YAML is edited
through ruamel.yaml's round-trip tree, so comments, key order and quoting
survive; JSON is rewritten with two-space indentation.  A branch name in
``model.revision`` is resolved through the hub cache's refs and pinned as
the commit.
"""

from __future__ import annotations

import difflib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.errors import FtManifestError, InputError

# Pinned by `lock` when installed, besides what the manifest already lists.
DEFAULT_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "safetensors",
    "tokenizers",
    "accelerate",
    "datasets",
    "trl",
    "bitsandbytes",
    "deepspeed",
    "flash-attn",
    "numpy",
    "huggingface-hub",
    "ftmanifest",
)

Path_ = tuple[Any, ...]


@dataclass
class LockResult:
    path: Path
    old_text: str
    new_text: str
    notes: list[str]

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=f"{self.path} (now)",
                tofile=f"{self.path} (locked)",
            )
        )


def updates_for(
    manifest_path: Path,
    *,
    use_cache: bool = True,
    code_dir: Path | None = None,
    allow_outside: bool = False,
) -> tuple[list[tuple[Path_, Any]], list[str]]:
    """The (field path, value) pairs that pin the manifest to this machine."""
    from ftmanifest.manifest import load_manifest
    from ftmanifest.observe import observe

    loaded = load_manifest(manifest_path)
    m = loaded.manifest
    seen = observe(
        m,
        manifest_path,
        use_cache=use_cache,
        code_dir=code_dir,
        allow_outside=allow_outside,
        settle=True,  # freshly written files wait out the racy window, so they are cached
    )
    if seen.model.error is not None:
        raise _in_manifest(seen.model.error, loaded.document, manifest_path)
    notes: list[str] = []
    env = seen.environment
    wanted = set(m.environment.packages) | {p for p in DEFAULT_PACKAGES if p in seen.installed}
    from ftmanifest.probe.fields import package_pins

    packages = package_pins(seen.installed, wanted)
    for name in sorted(set(m.environment.packages) - set(packages)):
        notes.append(f"package {name} is listed but not installed: kept as it was")
        packages[name] = m.environment.packages[name]
    env_vars = dict(env.get("env_vars", {}))
    for name, value in seen.env_values.items():
        if value is None:
            notes.append(f"environment variable {name} is unset here: kept as recorded")
            env_vars[name] = m.environment.env_vars[name]
        else:
            env_vars[name] = value
    backend = {k: v for k, v in env["backend"].items() if v not in (None, [])}
    ups: list[tuple[Path_, Any]] = [
        (("environment", "python"), env["python"]),
        (("environment", "packages"), dict(sorted(packages.items()))),
        (("environment", "backend"), backend),
        (("environment", "env_vars"), dict(sorted(env_vars.items()))),
    ]
    if "code" in env:
        ups.append((("environment", "code", "commit"), env["code"]["commit"]))
        ups.append((("environment", "code", "dirty"), env["code"]["dirty"]))
        if env["code"]["dirty"]:
            notes.append(
                "training code has uncommitted changes: pinned as dirty, which verify "
                "refuses (the changes are recorded nowhere); commit them and lock again"
            )
    model = seen.model
    if model.commit is not None:
        if m.model.revision != model.commit:
            notes.append(f"model revision {m.model.revision or 'main'} resolved to {model.commit}")
        ups.append((("model", "revision"), model.commit))
    files = [
        {"path": rel, "digest": f.digest, "size": f.size} for rel, f in sorted(model.files.items())
    ]
    ups.append((("model", "files"), files))
    ups.append((("model", "tree_digest"), model.tree_digest))
    for i, (entry, state) in enumerate(zip(m.data, seen.data, strict=True)):
        if state.error is not None:
            raise InputError(
                f"data {entry.name!r}: {state.error}",
                path=entry.path,
                field=f"data[{i}].path",
                hint="fix the path or create the data",
            )
        ups.append((("data", i, "digest"), state.digest))
        if state.records is not None:
            ups.append((("data", i, "records"), state.records))
    for field_name, state in seen.pinned.items():
        if state.error is not None:
            raise InputError(
                f"{field_name}: {state.path}: {state.error}",
                path=state.path,
                field=field_name,
                hint="fix the path or create the file",
            )
        ups.append((_parse_field(field_name) + ("digest",), state.digest))
    return ups, notes


def _in_manifest(exc: FtManifestError, document: Any, manifest_path: Path) -> FtManifestError:
    """Name the manifest (and the line of the field) on an error about one of
    its fields that was raised without knowing which file asked."""
    if exc.path is None:
        exc.path = str(manifest_path)
        if exc.field:
            exc.line, exc.column = document.position(_parse_field(exc.field))
    return exc


def _parse_field(text: str) -> Path_:
    """``data[0].cleaning[1]`` -> ("data", 0, "cleaning", 1)."""
    out: list[Any] = []
    for part in text.split("."):
        name, _, rest = part.partition("[")
        out.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            out.append(int(index))
            rest = rest.lstrip("[")
    return tuple(out)


def lock_manifest(
    path: str | Path,
    *,
    dry_run: bool = False,
    use_cache: bool = True,
    code_dir: Path | None = None,
    allow_outside: bool = False,
) -> LockResult:
    from ftmanifest.manifest.load import read_document

    manifest_path = Path(path)
    old_text = read_document(manifest_path).text  # refuses a missing or unreadable file
    suffix = manifest_path.suffix.lower()
    if suffix == ".toml":
        raise InputError(
            "lock rewrites YAML or JSON manifests, not TOML",
            path=str(path),
            hint="convert the manifest to YAML (comments are kept there)",
        )
    ups, notes = updates_for(
        manifest_path, use_cache=use_cache, code_dir=code_dir, allow_outside=allow_outside
    )
    new_text = _apply_json(old_text, ups) if suffix == ".json" else _apply_yaml(old_text, ups)
    result = LockResult(manifest_path, old_text, new_text, notes)
    if result.changed and not dry_run:
        from ftmanifest.fsutil import atomic_write_text

        mode = os.stat(manifest_path).st_mode & 0o777
        atomic_write_text(manifest_path, new_text, mode=mode)
    return result


def _apply_json(text: str, ups: list[tuple[Path_, Any]]) -> str:
    data = json.loads(text)
    for path, value in ups:
        _set(data, path, value, dict)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _apply_yaml(text: str, ups: list[tuple[Path_, Any]]) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    mapping_indent, offset = _guess_indent(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping_indent, sequence=mapping_indent + offset, offset=offset)
    # keep `null` written out: ruamel's round trip would turn `parent: null` into `parent:`
    yaml.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    tree = yaml.load(text)
    for path, value in ups:
        if path == ("model", "files"):
            seq = CommentedSeq()
            for item in value:
                entry = CommentedMap(item)
                entry.fa.set_flow_style()
                seq.append(entry)
            value = seq
        _set(tree, path, value, CommentedMap)
    out = io.StringIO()
    yaml.dump(tree, out)
    return out.getvalue()


def _guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, offset of '-' under its parent key) as the file uses them."""
    import re

    mapping, offset = 0, None
    previous_key_indent = None
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if stripped.startswith("- ") and previous_key_indent is not None and offset is None:
            offset = max(0, depth - previous_key_indent)
        elif re.match(r"[^\s#-][^:]*:\s*(#.*)?$", stripped):
            previous_key_indent = depth
        if depth and not mapping and not stripped.startswith("- "):
            mapping = depth
    return mapping or 2, 2 if offset is None else offset


def _split_trailing(node: Any, key: Any) -> Any:
    """Detach what follows ``key``'s own line (blank lines, full-line comments)."""
    from ruamel.yaml.tokens import CommentToken

    items = node.ca.items.get(key)
    token = items[2] if items and len(items) > 2 else None
    if not isinstance(token, CommentToken):
        return None
    text = token.value
    if text.startswith("#"):  # an inline comment stays on its key's line
        head, newline, rest = text.partition("\n")
        if not rest:
            return None
        token.value = head + newline
        rest = newline + rest  # a token's text starts with the end of its own line
    else:
        rest = text
        items[2] = None
    from ruamel.yaml.error import CommentMark

    return CommentToken(rest, CommentMark(0), None)


FILL_MARK = "# FILL"


def _drop_fill(node: Any, key: Any) -> None:
    """Drop the template's ``# FILL…`` comment from the line of a key lock just
    filled; any blank lines or comments after that line stay."""
    ca = getattr(node, "ca", None)
    items: Any = ca.items.get(key) if ca is not None else None
    token = items[2] if items and len(items) > 2 else None
    if token is None or not str(token.value).startswith(FILL_MARK):
        return
    _, newline, rest = token.value.partition("\n")
    if rest:
        token.value = newline + rest  # a token's text starts with the end of its own line
    else:
        items[2] = None


def _set(node: Any, path: Path_, value: Any, mapping: Any) -> None:
    for key in path[:-1]:
        if isinstance(key, int):
            node = node[key]
            continue
        if key not in node or node[key] is None:
            node[key] = mapping()
        node = node[key]
    last = path[-1]
    if isinstance(node, dict) and isinstance(value, dict) and isinstance(node.get(last), dict):
        existing = node[last]
        for k in [k for k in existing if k not in value]:
            del existing[k]
        for k, v in value.items():
            existing[k] = v
            _drop_fill(existing, k)
        _drop_fill(node, last)
    elif last not in node and hasattr(node, "ca") and len(node) and not isinstance(value, dict):
        # ruamel keeps a section's trailing blank line/comment on its last key;
        # move it to the key appended after it, so it still ends the section.
        trailing = _split_trailing(node, list(node)[-1])
        node[last] = value
        if trailing is not None:
            node.ca.items[last] = [None, None, trailing, None]
    else:
        node[last] = value
        _drop_fill(node, last)
