"""Bind a trained adapter to the base the manifest pins: judge, record, sign.

Layer: judging rooms - edge (orchestrates ``base``, ``check`` and ``binding``; writes
files).  Refuses (``BindRefusedError``, exit 1, with the findings) when the base here
drifted from the manifest's pins, when the adapter's LoRA facts are not the manifest's
method, when its tensors do not fit the base, or when a tokenizer or
``generation_config.json`` in the adapter folder is not the base's.  The binding pins
the base's tokenizer, ``generation_config.json`` and config values too (``outputs``).
Then writes the metadata and config fields first and signs last, so the signed subjects
are the files as they end up.  LoRA adapters and methods declared under ``method.kind:
peft`` are bound (the latter by their config's digest); another method than the
manifest's is refused in one sentence naming both.  With an ECDSA P-256 key in PEM form
(``keygen --type ecdsa-p256``) an OpenSSF model-signing bundle ``model.sig`` is written
too, before the binding, so the binding lists it among its subjects; it signs every file
but itself and the binding envelope (named in its ``serialization`` block, so
``model_signing verify`` leaves that out too).  Another key gets a note saying why not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.adapter import base as bases
from ftmanifest.adapter.binding import (
    Binding,
    adapter_weight_files,
    installed_versions,
    metadata_entries,
    method_facts,
    read_config,
    write_config_fields,
    write_metadata,
)
from ftmanifest.adapter.check import manifest_findings, structure_findings
from ftmanifest.adapter.loadable import adapter_stray_findings
from ftmanifest.adapter.outputs import pin_outputs
from ftmanifest.adapter.outputs_check import adapter_outputs_findings
from ftmanifest.adapter.signed import sign_binding
from ftmanifest.adapter.tensors import tensor_shapes
from ftmanifest.errors import RefusedError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest import targets as tg
from ftmanifest.manifest.renamed import renamed_keywords
from ftmanifest.signing.model_sig import SIGNATURE_NAME, cannot_write_reason, write_model_signature

if TYPE_CHECKING:
    from ftmanifest.signing.keys import PrivateKey


class BindRefusedError(RefusedError):
    """The adapter cannot be bound as it is (exit 1); carries the findings."""

    reason = "not-bindable"


@dataclass(frozen=True)
class BindResult:
    """What ``bind_adapter`` wrote: the binding, its signed envelope and the files it covers."""

    binding: Binding
    envelope_path: Path  # the signed binding written beside the adapter
    subjects: tuple[str, ...]  # the adapter's files the signature covers
    findings: tuple[Finding, ...]  # warnings only
    model_sig: Path | None = None  # the model-signing bundle written, if any
    notes: tuple[str, ...] = ()


@renamed_keywords(manifest_path="manifest")
def bind_adapter(
    adapter_dir: str | Path,
    manifest: str | Path,
    key: PrivateKey,
    *,
    use_cache: bool = True,
    allow_outside: bool = False,
    key_path: Path | None = None,
    password: bytes | None = None,
) -> BindResult:
    """Bind ``adapter_dir`` to the manifest's base, signed with ``key`` (Ed25519
    or ECDSA P-256).  ``key_path`` (the file ``key`` was read from, and its
    ``password``) also asks for ``model.sig``, made from that file by model-signing."""
    folder, mpath = Path(adapter_dir), Path(manifest)
    loaded = load_manifest(mpath)
    config = read_config(folder)
    base, findings = bases.from_manifest(
        loaded.manifest, mpath, use_cache=use_cache, allow_outside=allow_outside
    )
    findings += adapter_stray_findings(folder) + base.stray_findings()
    findings += adapter_outputs_findings(folder, base.folder)
    found, tree = structure_findings(
        config, tensor_shapes(adapter_weight_files(folder)), base, str(folder)
    )
    findings += manifest_findings(loaded, config, None, str(folder), tree=tree)
    findings += found
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise BindRefusedError(
            f"refusing to bind: {errors[0].message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            path=errors[0].path,
            field=errors[0].field,
            expected=errors[0].expected,
            observed=errors[0].observed,
            hint=errors[0].hint,
            findings=findings,
        )
    export = loaded.manifest.export
    binding = Binding(
        base_tensor_digest=base.tensors().digest,
        base_tensors=base.tensors().tensors,
        base_repo=base.repo,
        base_revision=base.revision,
        base_tree_digest=base.tree_digest,
        manifest_digest=loaded.digest(),
        method=method_facts(config, _wrapped(config, tree)),
        versions=installed_versions(),
        required=tuple(export.bind) if export is not None else (),
        base_config_digest=base.config_digest(),
        base_bytes=base.tensors().bytes,
        base_outputs=pin_outputs(base.folder, base.raw_config()),
    )
    for path in adapter_weight_files(folder):
        write_metadata(path, metadata_entries(binding))
    write_config_fields(folder, base.repo, base.revision)
    model_sig: Path | None = None
    notes: tuple[str, ...] = ()
    if key_path is not None:
        model_sig, notes = _model_signature(folder, key, key_path, password)
    envelope_path, subjects = sign_binding(folder, binding, key, use_cache=use_cache)
    return BindResult(binding, envelope_path, subjects, tuple(findings), model_sig, notes)


def _model_signature(
    folder: Path, key: Any, key_path: Path, password: bytes | None
) -> tuple[Path | None, tuple[str, ...]]:
    """Write ``model.sig`` when the key allows, else say why not (and whether an
    old one was left: it no longer matches the files bind just rewrote)."""
    from ftmanifest.adapter.binding import ENVELOPE_NAME

    why = cannot_write_reason(key, key_path)
    if why is None:
        return write_model_signature(folder, key_path, password, ignore=(ENVELOPE_NAME,)), ()
    old = folder / SIGNATURE_NAME
    if old.exists():
        why += f"; the existing {old} was left as it was and no longer matches the files"
    return None, (why,)


def _wrapped(config: dict[str, Any], tree: tg.Tree) -> list[str] | None:
    """The modules a LoRA config wraps on the base (None for other methods)."""
    if str(config.get("peft_type", "")).upper() != "LORA":
        return None
    return list(tg.resolve(tg.spec_from_config(config), tree).wrapped)
