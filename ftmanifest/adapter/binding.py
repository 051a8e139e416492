"""The binding record of an adapter, and the three places it is written.

Layer: judging rooms - signing client and file writer (edge).  A binding says: this
adapter was trained on the base whose tensor digest is T (repo, revision and tree digest
for the record), under the manifest with digest M, with these LoRA facts and these
library versions.  It is written

1. as a signed in-toto statement beside the adapter (``ENVELOPE_NAME`` in the
   adapter folder; predicate type ``PREDICATE_TYPE``; every other file of the
   folder a subject by its sha256, so any change after binding shows);
2. into every adapter safetensors file's ``__metadata__`` (``METADATA_KEY``:
   the predicate as canonical JSON, a string as the format requires), so the
   weights carry their base wherever they are copied;
3. into ``adapter_config.json`` (``base_model_name_or_path`` = the repo id,
   ``revision`` = the commit), so peft and ``AutoPeftModel`` load the right base.

Only 1 is trusted when checking; 2 and 3 are covered by its subjects.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ftmanifest.adapter import lora_fields
from ftmanifest.adapter.loadable import adapter_weight_file
from ftmanifest.adapter.method import config_digest, peft_type_of, plain
from ftmanifest.adapter.outputs import OutputsPin
from ftmanifest.adapter.tensors import read_header
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.fsutil import atomic_write_bytes, atomic_write_text
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.untrusted import read_untrusted

PREDICATE_TYPE = "https://ftmanifest.dev/adapter-binding/v1"
ENVELOPE_NAME = "ftmanifest-binding.sig.json"
METADATA_KEY = "ftmanifest.binding"
CONFIG_NAME = "adapter_config.json"
CONFIG_MAX_BYTES = 16 << 20
VERSIONED = ("peft", "transformers", "torch")
METHOD_FIELDS = ("kind", "r", "alpha", "dropout", "target_modules", "modules_to_save", "bias",
                 "use_rslora", "use_dora", "exclude_modules", "rank_pattern", "alpha_pattern",
                 "init", "layer_replication", "fan_in_fan_out")  # fmt: skip
# What a LoRA binding signed before these fields existed meant by their absence: peft's defaults.
METHOD_DEFAULTS: dict[str, Any] = {"exclude_modules": None, "rank_pattern": {},
                                   "alpha_pattern": {}, "init": True, "layer_replication": None,
                                   "fan_in_fan_out": False}  # fmt: skip


def installed_versions() -> dict[str, str | None]:
    """peft/transformers/torch versions from package metadata (never imported)."""
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@dataclass(frozen=True)
class Binding:
    """What a signed binding states about its adapter."""

    base_tensor_digest: str
    base_tensors: int
    base_repo: str | None = None
    base_revision: str | None = None
    base_tree_digest: str | None = None
    manifest_digest: str | None = None
    method: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    base_config_digest: str | None = None
    base_bytes: int | None = None
    # the base's tokenizer, generation_config.json and config values (None: bound before them)
    base_outputs: OutputsPin | None = None
    file_sizes: dict[str, int] = field(default_factory=dict)  # envelope only: set when signing

    def predicate(self) -> dict[str, Any]:
        return {
            "base": {
                "repo": self.base_repo,
                "revision": self.base_revision,
                "treeDigest": self.base_tree_digest,
                "tensorDigest": self.base_tensor_digest,
                "tensors": self.base_tensors,
                "bytes": self.base_bytes,
                "configDigest": self.base_config_digest,
                **({"outputs": self.base_outputs.to_dict()} if self.base_outputs else {}),
            },
            "manifest": {"digest": self.manifest_digest},
            "method": dict(self.method),
            "versions": dict(self.versions),
            "required": list(self.required),
            **({"adapter": {"sizes": dict(self.file_sizes)}} if self.file_sizes else {}),
        }

    @classmethod
    def from_predicate(cls, pred: dict[str, Any]) -> Binding:
        """The binding a signed predicate states; ``ValueError`` naming the defect."""
        try:
            base, man = pred["base"], pred["manifest"]
            digest = base["tensorDigest"]
            if not isinstance(digest, str) or not digest.startswith("sha256-tensors:"):
                raise ValueError("base.tensorDigest is not a sha256-tensors digest")
            return cls(
                base_tensor_digest=digest,
                base_tensors=int(base["tensors"]),
                base_repo=_opt_str(base.get("repo"), "base.repo"),
                base_revision=_opt_str(base.get("revision"), "base.revision"),
                base_tree_digest=_opt_str(base.get("treeDigest"), "base.treeDigest"),
                manifest_digest=_opt_str(man.get("digest"), "manifest.digest"),
                method=dict(pred["method"]),
                versions={str(k): _opt_str(v, "versions") for k, v in pred["versions"].items()},
                required=tuple(str(r) for r in pred.get("required", [])),
                base_config_digest=_opt_str(base.get("configDigest"), "base.configDigest"),
                base_bytes=_opt_int(base.get("bytes"), "base.bytes"),
                base_outputs=OutputsPin.from_dict(base["outputs"]) if "outputs" in base else None,
                file_sizes={str(k): _int(v, "adapter.sizes")
                            for k, v in (pred.get("adapter") or {}).get("sizes", {}).items()},
            )  # fmt: skip
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"binding predicate lacks or mistypes {exc}") from None


def _opt_str(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value


def _opt_int(value: Any, name: str) -> int | None:
    return None if value is None else _int(value, name)


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} is not a byte count")
    return value


def method_facts(config: dict[str, Any], wrapped: Any = None) -> dict[str, Any]:
    """What the binding states about the method, from a peft ``adapter_config.json``:
    LoRA's ``METHOD_FIELDS`` (``wrapped``: the modules it wraps on the base, as
    resolved), any other method's ``peft_type``; and the digest of the whole
    config (``adapter.method.config_digest``) for every method."""
    digest = config_digest(config)
    peft_type = peft_type_of(config)
    if peft_type != "LORA":
        return {"kind": "peft", "peft_type": peft_type, "config_digest": digest}
    targets = config.get("target_modules")
    excluded = config.get("exclude_modules")
    facts = {
        "kind": "lora",
        "r": config.get("r"),
        "alpha": config.get("lora_alpha"),
        "dropout": config.get("lora_dropout"),
        "target_modules": sorted(targets) if isinstance(targets, (list, set)) else targets,
        "modules_to_save": sorted(config.get("modules_to_save") or []),
        "bias": config.get("bias"),
        "use_rslora": bool(config.get("use_rslora")),
        "use_dora": bool(config.get("use_dora")),
        "exclude_modules": sorted(excluded) if isinstance(excluded, (list, set)) else excluded,
        "rank_pattern": plain(config.get("rank_pattern") or {}),
        "alpha_pattern": plain(config.get("alpha_pattern") or {}),
        "init": plain(config.get("init_lora_weights", True)),
        "layer_replication": plain(config.get("layer_replication") or None),
        "fan_in_fan_out": bool(config.get("fan_in_fan_out")),
        "config_digest": digest,
    }
    if wrapped is not None:
        facts["wrapped"] = sorted(wrapped)
    return facts


def bound_method(binding: Binding) -> dict[str, Any]:
    """The method a binding states; a LoRA binding signed before a field of
    ``METHOD_FIELDS`` existed has peft's default for it."""
    if binding.method.get("kind") != "lora":
        return dict(binding.method)
    return {**METHOD_DEFAULTS, **binding.method}


def read_json(path: Path, what: str, hint: str) -> Any:
    """A small JSON file, read as untrusted input: never blocks on a FIFO, capped."""
    raw = read_untrusted(path, limit=CONFIG_MAX_BYTES, what=what, hint=hint)
    try:  # a repeated key: first-wins and last-wins readers would see two configs
        return json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys(_duplicate))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(
            f"unreadable {what}: {exc}", path=str(path), expected="a JSON object", hint=hint
        ) from None


def _duplicate(key: str) -> ValueError:
    return ValueError(f"duplicate key {key!r}")


def read_config(adapter_dir: Path) -> dict[str, Any]:
    path = adapter_dir / CONFIG_NAME
    hint = "point at the folder PeftModel.save_pretrained wrote"
    try:
        data = read_json(path, CONFIG_NAME, hint)
    except FileNotFoundError:
        raise InputNotFoundError(
            f"not a peft adapter folder: no {CONFIG_NAME}",
            path=str(adapter_dir),
            expected=f"{CONFIG_NAME} and adapter_model.safetensors (peft save_pretrained)",
            hint=hint,
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{CONFIG_NAME} is not a JSON object", path=str(path), hint=hint)
    problem = lora_fields.type_problem(data) if peft_type_of(data) == "LORA" else None
    if problem is not None:  # a resolver fed "four" for r crashed
        key, expected, observed = problem
        raise InputError(
            f"{CONFIG_NAME} {key} is not of the type peft reads", path=str(path), field=key,
            expected=expected, observed=json.dumps(observed),
            hint=f"give {key} as {expected}, or re-save the adapter with peft save_pretrained",
        )  # fmt: skip
    return data


def adapter_weight_files(adapter_dir: Path) -> list[Path]:
    """The weights peft loads (``loadable``); other weights are findings there."""
    return [adapter_weight_file(adapter_dir)]


def write_metadata(path: Path, entries: dict[str, str]) -> None:
    """Rewrite a safetensors file with ``entries`` added to ``__metadata__``
    (atomically; tensor data unchanged, header padded to 8 bytes as writers do)."""
    header = read_header(path)
    doc: dict[str, Any] = {"__metadata__": {**header.metadata, **entries}}
    for e in sorted(header.tensors, key=lambda e: e.begin):
        doc[e.name] = {
            "dtype": e.dtype,
            "shape": list(e.shape),
            "data_offsets": [e.begin - header.data_start, e.end - header.data_start],
        }
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with path.open("rb") as fh:
        fh.seek(header.data_start)
        data = fh.read()
    atomic_write_bytes(path, struct.pack("<Q", len(raw)) + raw + data, mode=_mode(path))


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def write_config_fields(adapter_dir: Path, repo: str | None, revision: str | None) -> None:
    """``base_model_name_or_path`` and ``revision`` in ``adapter_config.json``
    (a local base keeps the path it was trained from)."""
    config = read_config(adapter_dir)
    if repo is not None:
        config["base_model_name_or_path"] = repo
        config["revision"] = revision
    path = adapter_dir / CONFIG_NAME
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    atomic_write_text(path, text, mode=_mode(path))


def embedded(path: Path) -> dict[str, Any] | None:
    """The binding predicate a safetensors file carries, or None."""
    text = read_header(path).metadata.get(METADATA_KEY)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def metadata_entries(binding: Binding) -> dict[str, str]:
    return {METADATA_KEY: canonical_json(binding.predicate()).decode("utf-8")}
