"""Which files transformers and peft would load from a folder, chosen as they choose.

Layer: judging rooms - edge (lists folders, reads the shard index; below ``base`` and
``check``).  A tensor digest proves something only about the files that are loaded, so
the files digested are picked by the loaders' own rules, not by a glob:

transformers 4.4x-5.x, ``from_pretrained(folder)`` (``modeling_utils.
_get_resolved_checkpoint_files``): ``config.transformers_weights`` when set,
else ``model.safetensors``, else ``model.safetensors.index.json`` (its
shards), else -- or with ``use_safetensors=False`` -- ``pytorch_model.bin``
or its index.  peft ``load_peft_weights``: ``adapter_model.safetensors``,
else -- or with ``use_safetensors=False`` -- ``adapter_model.bin``.

Weights a loader could pick instead of the digested ones (a pickle beside the
safetensors) are refusals: the digest proves nothing about them.  The base's
``config.json`` shapes what the weights become (tied embeddings, dtype, rope
scaling, the weights file itself), so the binding carries its digest too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ftmanifest.adapter.architecture import finding
from ftmanifest.errors import InputError
from ftmanifest.findings import Finding

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_PICKLE = "adapter_model.bin"
ADAPTER_CONFIG = "adapter_config.json"
CONFIG_DIGEST_KIND = "sha256-config"
# Written by every save_pretrained and not read back as model settings.
CONFIG_INFORMATIONAL = frozenset({"transformers_version", "_name_or_path", "_commit_hash"})
# What transformers loads with use_safetensors=False (or used to, from_tf/from_flax).
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack")


def base_weight_files(folder: Path, config: dict[str, Any]) -> list[Path]:
    """The safetensors files ``from_pretrained(folder)`` loads, in its order of
    preference; ``InputError`` when it would load no safetensors at all."""
    from ftmanifest.adapter.tensors import index_shards

    explicit = config.get("transformers_weights")
    if explicit is not None:
        name = str(explicit)
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise InputError(
                "config.json transformers_weights names a file outside the folder",
                path=str(folder / "config.json"), field="transformers_weights",
                expected="a file name in the model folder", observed=name,
                hint="remove transformers_weights from config.json",
            )  # fmt: skip
        if name.endswith(".safetensors.index.json"):
            return index_shards(folder / name)
        if name.endswith(".safetensors"):
            return [folder / name]
        raise InputError(
            "config.json transformers_weights names no safetensors file",
            path=str(folder / "config.json"), field="transformers_weights",
            expected="*.safetensors or *.safetensors.index.json", observed=name,
            hint="remove transformers_weights from config.json",
        )  # fmt: skip
    if (folder / SAFE_WEIGHTS).is_file() or (folder / SAFE_WEIGHTS).is_symlink():
        return [folder / SAFE_WEIGHTS]
    if (folder / SAFE_INDEX).exists():
        return index_shards(folder / SAFE_INDEX)
    raise InputError(
        f"transformers would load no safetensors weights from {folder}",
        path=str(folder), field=SAFE_WEIGHTS,
        expected=f"{SAFE_WEIGHTS} or {SAFE_INDEX} (what from_pretrained loads)",
        observed=", ".join(sorted(p.name for p in _top(folder))) or "no files",
        hint="re-save the base: load it and save_pretrained(safe_serialization=True)",
    )  # fmt: skip


def _top(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []


def base_stray_findings(folder: Path, chosen: list[Path]) -> list[Finding]:
    """Weights beside the digested ones: pickles are refusals (loaded with
    ``use_safetensors=False``), other safetensors warnings (never loaded); an
    ``adapter_config.json`` is a refusal (``from_pretrained`` applies that adapter)."""
    keep = {p.name for p in chosen}
    out: list[Finding] = []
    top = sorted(_top(folder))
    if any(p.name == ADAPTER_CONFIG for p in top):
        # transformers' PeftAdapterMixin: from_pretrained(folder) finds adapter_config.json,
        # loads base_model_name_or_path and applies the folder's adapter weights
        weights = [p.name for p in top if p.name in (ADAPTER_WEIGHTS, ADAPTER_PICKLE)]
        keep |= set(weights)
        named = ", ".join([ADAPTER_CONFIG, *weights])
        out.append(finding(
            "base-holds-adapter", f"the base folder holds {named}: transformers' from_pretrained "
            "loads that adapter onto the base (and the base named in its "
            "base_model_name_or_path), so the model that computes is not the bound base",
            path=str(folder / ADAPTER_CONFIG), field="base.files",
            expected=f"no {ADAPTER_CONFIG} in the base folder", observed=named,
            hint=f"remove {named} from the base folder (an adapter belongs in its own folder)",
        ))  # fmt: skip
    for p in top:
        if p.name in keep:
            continue
        if p.name.endswith(PICKLE_SUFFIXES):
            out.append(finding(
                "base-unjudged-weights", f"the base folder holds {p.name}, weights the tensor "
                "digest does not cover (from_pretrained loads them with use_safetensors=False)",
                path=str(p), field="base.files", expected="safetensors weights only",
                observed=p.name, hint=f"remove {p.name} from the base folder, or check a "
                "folder that holds only the safetensors weights",
            ))  # fmt: skip
        elif p.name.endswith(".safetensors"):
            out.append(finding(
                "base-stray-weights", f"{p.name} is in the base folder but not loaded "
                f"(from_pretrained loads {', '.join(sorted(keep))})", "warning",
                path=str(p), field="base.files", expected=", ".join(sorted(keep)),
                observed=p.name, hint=f"remove the stale {p.name}",
            ))  # fmt: skip
    return out


def base_config_findings(folder: Path, config: dict[str, Any]) -> list[Finding]:
    """A ``config.json`` whose ``configuration_files`` send transformers to another
    config file (``PretrainedConfig.get_config_dict`` reads the ``config.X.json``
    for its version instead): the bound config digest covers ``config.json`` only."""
    listed = config.get("configuration_files")
    if listed is None:
        return []
    return [finding(
        "base-config-indirect", "the base's config.json lists configuration_files: "
        "transformers builds the model from the file it picks there, which is not bound",
        path=str(folder / "config.json"), field="configuration_files",
        expected="no configuration_files (the settings in config.json itself)",
        observed=json.dumps(listed),
        hint="load the base with transformers and save_pretrained it again (one config.json), "
        "or copy the settings of the file transformers picks into config.json and drop "
        "configuration_files; then bind again",
    )]  # fmt: skip


def adapter_weight_file(folder: Path) -> Path:
    """``adapter_model.safetensors``: what peft loads; ``InputError`` when absent."""
    path = folder / ADAPTER_WEIGHTS
    if not (path.is_file() or path.is_symlink()):
        raise InputError(
            "the adapter has no safetensors weights",
            path=str(folder), field=ADAPTER_WEIGHTS, expected=ADAPTER_WEIGHTS,
            observed="absent" if not path.exists() else "not a regular file",
            hint="save the adapter with save_pretrained(safe_serialization=True)",
        )  # fmt: skip
    return path


def adapter_stray_findings(folder: Path) -> list[Finding]:
    """Weights in the adapter folder that are not the judged safetensors:
    ``adapter_model.bin`` (peft loads it with ``use_safetensors=False``) and
    any other safetensors file (never judged against the base)."""
    out: list[Finding] = []
    for p in sorted(_top(folder)):
        if p.name == ADAPTER_WEIGHTS:
            continue
        if p.name == ADAPTER_PICKLE or p.name.endswith(".safetensors"):
            out.append(finding(
                "unjudged-weights", f"the adapter folder holds {p.name}, weights that are not "
                f"{ADAPTER_WEIGHTS} and were never judged against the base",
                path=str(p), field=p.name, expected=f"{ADAPTER_WEIGHTS} as the only weights",
                observed=p.name, hint=f"remove {p.name} (peft loads {ADAPTER_WEIGHTS}), then bind",
            ))  # fmt: skip
    return out


def config_digest(config: dict[str, Any] | None) -> str | None:
    """``sha256-config:<hex>`` over the canonical JSON of ``config.json`` less
    the keys every save rewrites (``CONFIG_INFORMATIONAL``); None when absent."""
    if config is None:
        return None
    kept = {k: v for k, v in config.items() if k not in CONFIG_INFORMATIONAL}
    raw = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{CONFIG_DIGEST_KIND}:{hashlib.sha256(raw.encode('utf-8')).hexdigest()}"
