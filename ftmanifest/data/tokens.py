"""The pinned model's tokenizer, offline, and a record's length in its tokens.

Layer: judging rooms - data (edge: hashes the tokenizer's files, loads it with
transformers, imported inside the functions).  The tokenizer is used only when every
tokenizer file in the model's folder has the digest ``model.files`` pins (hashed through
``hashing.hash_file``, the stat cache's shared path); a model whose files are not pinned
yet is used as found.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftmanifest.data.text import record_text
from ftmanifest.errors import FtManifestError
from ftmanifest.extras import install_line
from ftmanifest.hashing.files import hash_file
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.model import Manifest

TRANSFORMERS_MISSING = "transformers is not installed"  # the start of the why, when it is that

TOKENIZER_FILES = (
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
    "merges.txt",
    "special_tokens_map.json",
    "spiece.model",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
    "vocab.txt",
)
"""What ``AutoTokenizer`` reads from a model folder (config.json picks the class)."""


def unpinned_file(manifest: Manifest, folder: Path) -> str | None:
    """Why the tokenizer in ``folder`` is not the pinned one, or None when it is
    (or when ``model.files`` pins nothing yet)."""
    pins = {f.path: f.digest for f in manifest.model.files}
    if not pins:
        return None
    for name in TOKENIZER_FILES:
        path = folder / name
        if not path.exists() and not path.is_symlink():
            continue
        want = pins.get(name)
        try:
            have = hash_file(path).digest
        except FtManifestError as exc:
            return f"the tokenizer file {name} cannot be read ({exc.message})"
        if want is None or have != want:
            what = "is not pinned in model.files" if want is None else "differs from its pin"
            return f"the tokenizer file {name} {what} (in {folder}; run ftmanifest verify)"
    return None


def count_tokens(value: Any, tokenizer: Any, fields: Sequence[str] = ()) -> int:
    """Tokens of one record as a training example (no truncation); its plain text's
    tokens when preflight's format does not fit it."""
    # lazy: pydantic (preflight builds the manifest models); results files import this module
    from ftmanifest.preflight.recipe import default_format

    try:
        ex = default_format(value, tokenizer, sys.maxsize, "all")
        return ex.prompt_len + ex.completion_len
    except Exception:  # an odd record or template: fall back to its text
        return len(tokenizer(record_text(value, fields))["input_ids"])


def load_tokenizer(loaded: LoadedManifest, *, allow_outside: bool = False) -> tuple[Any, str]:
    """(the pinned model's tokenizer, where it came from), or (None, why not).

    Never downloads: ``model.path`` or the hub snapshot already in the cache,
    loaded with ``local_files_only``, and only when its tokenizer files are the
    pinned ones (``unpinned_file``).
    """
    from ftmanifest.adapter.base import pinned_folder  # lazy: hyperscan, through the scan

    try:
        folder = pinned_folder(loaded.manifest, Path(loaded.path), allow_outside=allow_outside)
    except FtManifestError as exc:
        return None, f"the pinned model is not here ({exc.message})"
    if not folder.is_dir():
        return None, f"the pinned model's folder is not here ({folder})"
    differs = unpinned_file(loaded.manifest, folder)
    if differs is not None:
        return None, differs
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None, f"{TRANSFORMERS_MISSING} ({install_line('transformers')})"
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # missing or broken tokenizer files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"no tokenizer loads from {folder}: {first[:200]}"
    return tokenizer, str(folder)
