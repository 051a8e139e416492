"""Load an adapter only onto the base it is bound to.

Layer: edge (torch, transformers and peft, imported inside the functions).
``load_bound`` runs ``check_adapter`` first and loads through
``PeftModel.from_pretrained`` only when nothing refused; otherwise it raises
``AdapterRefusedError`` (a ``RefusedError``, exit 1) carrying every finding,
the same reasons the CLI prints.  ``check_loaded_base`` is for code that
loads the base itself: it digests the model's state dict on the CPU, one
tensor chunk at a time, and compares it with the bound tensor digest.

Tied weights (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) are
one tensor under two names in a state dict but saved once, under one of the
names; the loaded digest is computed for each choice of kept name (a few
combinations, capped at ``MAX_ALIAS_CHOICES``) over per-tensor hashes
computed once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ftmanifest.adapter.architecture import finding
from ftmanifest.adapter.check import AdapterRefusedError, AdapterReport, check_adapter, require_ok
from ftmanifest.adapter.tensors import TensorRecord, combine, tensor_record
from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding

MAX_ALIAS_CHOICES = 64


def load_bound(
    adapter_dir: str | Path,
    *,
    base: str | Path | None = None,
    manifest: str | Path | None = None,
    model: Any = None,
    trust_path: Path | None = None,
    model_class: Any = None,
    **from_pretrained: Any,
) -> Any:
    """Check ``adapter_dir`` against its base, then load it with peft.

    The base is ``base`` (a folder), else the manifest's, else the one the
    binding names.  ``model``: a base model already loaded by the caller;
    its weights are digested and must be the bound ones.  Otherwise the base
    folder is loaded with ``model_class`` (default ``AutoModelForCausalLM``).
    Extra keyword arguments go to ``PeftModel.from_pretrained``.
    """
    import tempfile

    for name in sorted(set(from_pretrained) & UNCHECKED_KWARGS):
        raise UsageError(
            f"load_bound cannot pass {name}= to peft: it would load files that were not checked",
            field=name, expected="no " + name, observed=repr(from_pretrained[name]),
            hint="point load_bound at the adapter folder itself",
        )  # fmt: skip
    report = require_ok(
        check_adapter(adapter_dir, manifest_path=manifest, base_dir=base, trust_path=trust_path)
    )
    assert report.binding is not None and report.base_folder is not None
    with tempfile.TemporaryDirectory(prefix="ftmanifest-adapter-") as tmp:
        # peft reads a private copy, checked again against the signed subjects:
        # a file swapped after the check is refused, never loaded.
        private = _snapshot(Path(adapter_dir), Path(tmp) / "adapter", report,
                            search_from=manifest, trust_path=trust_path)  # fmt: skip
        if model is None:
            if model_class is None:
                from transformers import AutoModelForCausalLM

                model_class = AutoModelForCausalLM
            model = model_class.from_pretrained(str(report.base_folder))
        # what was loaded, not what was checked: a base swapped or read from
        # other files (a pickle, another config) since the check is refused here
        require_loaded_base(model, report)
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(private), **from_pretrained)


# peft keywords that read other files than the checked folder's own
UNCHECKED_KWARGS = frozenset({"subfolder", "revision", "token", "use_auth_token"})


def _snapshot(
    folder: Path,
    dest: Path,
    report: AdapterReport,
    *,
    search_from: str | Path | None,
    trust_path: Path | None,
) -> Path:
    """A private copy of ``folder`` whose files are the signed subjects."""
    import shutil

    from ftmanifest.adapter.binding import ENVELOPE_NAME
    from ftmanifest.adapter.signed import read_signed

    shutil.copytree(folder, dest, symlinks=False)
    again = read_signed(dest, search_from=search_from or folder / ENVELOPE_NAME,
                        trust_path=trust_path, use_cache=False)  # fmt: skip
    if again.binding != report.binding or any(f.severity == "error" for f in again.findings):
        report.findings.extend(
            f._replace(path=str(folder / (f.field or "")), severity="error") for f in again.findings
        )
        if report.ok:
            report.findings.append(finding(
                "files-changed", "the adapter changed while it was being loaded",
                path=str(folder), field=ENVELOPE_NAME, expected="the checked binding",
                observed="another binding", hint="load it again once nothing writes to it",
            ))  # fmt: skip
        require_ok(report)
    return dest


def require_loaded_base(model: Any, report: AdapterReport) -> None:
    """Raise ``AdapterRefusedError`` unless ``model`` holds the bound weights."""
    assert report.binding is not None
    found = check_loaded_base(model, report.binding.base_tensor_digest)
    if found:
        report.findings.extend(found)
        require_ok(report)


def check_loaded_base(model: Any, expected: str) -> list[Finding]:
    """No finding when ``model``'s weights (its state dict) have the tensor
    digest ``expected``; else one ``adapter.base-weights-differ``."""
    state = model.state_dict()
    records = {name: tensor_record(name, t) for name, t in state.items()}
    digests = set(_digests(records, _alias_groups(state)))
    if expected in digests:
        return []
    return [
        finding(
            "base-weights-differ",
            "the loaded base model's weights are not those the adapter was bound to",
            field="base.tensorDigest",
            expected=expected,
            observed=sorted(digests)[0],
            hint="load the bound base in the precision it was saved in (no torch_dtype "
            "cast, no quantization), with the class it was saved from",
        )
    ]


def _alias_groups(state: dict[str, Any]) -> list[list[str]]:
    """Names that share one tensor's memory (tied weights), groups of two or more."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, t in state.items():
        if t.numel() == 0:
            continue
        key = (t.device, t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))
        groups.setdefault(key, []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def _digests(records: dict[str, TensorRecord], groups: list[list[str]]) -> Iterator[str]:
    """The digest with every alias group kept whole, then with one name per group."""
    yield combine(records.values())
    choices = itertools.islice(itertools.product(*groups), MAX_ALIAS_CHOICES)
    for kept in choices if groups else ():
        dropped = {n for g, k in zip(groups, kept, strict=True) for n in g if n != k}
        yield combine(r for n, r in records.items() if n not in dropped)


__all__ = ["AdapterRefusedError", "check_loaded_base", "load_bound", "require_loaded_base"]
