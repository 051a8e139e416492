"""Load an adapter only onto the base it is bound to.

Layer: judging rooms - edge (torch, transformers and peft, imported inside the
functions).  ``load_bound`` runs ``check_adapter`` first and loads through
``PeftModel.from_pretrained`` only when nothing refused; otherwise it raises
``AdapterRefusedError`` (a ``RefusedError``, exit 1) carrying every finding, the same
reasons the CLI prints.  ``check_loaded_base`` is for code that loads the base itself:
it digests the model's state dict on the CPU, one tensor chunk at a time, and compares
it with the bound tensor digest; ``check_loaded_config`` compares its
``config.to_dict()`` with the config transformers builds from the bound ``config.json``
(read again, its digest checked, loaded from a private copy), less
``RUNTIME_CONFIG_KEYS``.  Only ``PEFT_KWARGS`` reach peft: ``config=`` or
``key_mapping=`` would load the adapter otherwise than it was checked.

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

from ftmanifest.adapter import base as bases
from ftmanifest.adapter.architecture import collapse, finding
from ftmanifest.adapter.check import (
    AdapterRefusedError,
    AdapterReport,
    check_adapter,
    config_findings,
    require_ok,
)
from ftmanifest.adapter.loadable import CONFIG_INFORMATIONAL, base_config_findings
from ftmanifest.adapter.tensors import TensorRecord, combine, tensor_record
from ftmanifest.errors import InputError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.manifest.renamed import renamed_keywords

MAX_ALIAS_CHOICES = 64


@renamed_keywords(base="base_dir")
def load_bound(
    adapter_dir: str | Path,
    *,
    base_dir: str | Path | None = None,
    manifest: str | Path | None = None,
    model: Any = None,
    trust_path: Path | None = None,
    model_class: Any = None,
    **from_pretrained: Any,
) -> Any:
    """Check ``adapter_dir`` against its base, then load it with peft.

    The base is ``base_dir`` (a folder), else the manifest's, else the one the
    binding names.  ``model``: a base model already loaded by the caller;
    its weights are digested and must be the bound ones.  Otherwise the base
    folder is loaded with ``model_class`` (default ``AutoModelForCausalLM``).
    Extra keyword arguments go to ``PeftModel.from_pretrained``: only
    ``PEFT_KWARGS``, others raise ``UsageError``.  The model, given or loaded,
    must have the bound weights and the bound config.
    """
    import tempfile

    for name in sorted(set(from_pretrained) - PEFT_KWARGS):
        why = ("it would load files that were not checked" if name in UNCHECKED_KWARGS
               else "peft would load the adapter otherwise than it was checked")  # fmt: skip
        raise UsageError(
            f"load_bound cannot pass {name}= to peft: {why}", field=name,
            expected="only " + ", ".join(sorted(PEFT_KWARGS)),
            observed=repr(from_pretrained[name])[:200],
            hint="point load_bound at the adapter folder itself"
            if name in UNCHECKED_KWARGS else f"drop {name}=: the adapter's own checked "
            "adapter_config.json and tensor names are what load_bound loads",
        )  # fmt: skip
    report = require_ok(
        check_adapter(adapter_dir, manifest=manifest, base_dir=base_dir, trust_path=trust_path)
    )
    assert report.binding is not None and report.base_folder is not None
    with tempfile.TemporaryDirectory(prefix="ftmanifest-adapter-") as tmp:
        # peft reads a private copy, checked again against the signed subjects:
        # a file swapped after the check is refused, never loaded.
        private = _snapshot(Path(adapter_dir), Path(tmp) / "adapter", report,
                            search_from=manifest, trust_path=trust_path)  # fmt: skip
        expected = _checked_config(report, Path(tmp) / "config")
        if model is None:
            if model_class is None:
                from transformers import AutoModelForCausalLM

                model_class = AutoModelForCausalLM
            # config= the checked one: config.json is not read again from the folder
            model = model_class.from_pretrained(str(report.base_folder), config=expected)
        # what was loaded, not what was checked: a base swapped or read from
        # other files (a pickle, another config) since the check is refused here
        require_loaded_base(model, report)
        found = check_loaded_config(model, expected, report.base_folder / "config.json")
        if found:
            report.findings.extend(found)
            require_ok(report)
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(private), **from_pretrained)


# peft keywords that read other files than the checked folder's own
UNCHECKED_KWARGS = frozenset({"subfolder", "revision", "token", "use_auth_token"})
# PeftModel.from_pretrained keywords that leave what is computed as checked: the
# adapter's name, requires_grad, fp32 compute of fp16 adapter weights, where it
# is placed.  Any other (config=, key_mapping=...) is refused.
PEFT_KWARGS = frozenset({"adapter_name", "is_trainable", "autocast_adapter_dtype",
                         "ephemeral_gpu_offload", "low_cpu_mem_usage", "torch_device"})  # fmt: skip
# Keys of PretrainedConfig.to_dict() that do not change the logits: written by
# every save (CONFIG_INFORMATIONAL), what forward returns or caches, and the dtype
# (the weights' dtype is in the tensor digest, which check_loaded_base compares).
RUNTIME_CONFIG_KEYS = CONFIG_INFORMATIONAL | {"output_attentions", "output_hidden_states",
                                              "return_dict", "use_cache", "dtype",
                                              "torch_dtype"}  # fmt: skip
SHOWN_KEYS = 3


def _checked_config(report: AdapterReport, folder: Path) -> Any:
    """The transformers config of the base's ``config.json`` as bound: read once
    more, refused unless its digest is still the binding's, and built from a
    private copy of what was read (a config.json swapped after the check is not
    the one loaded)."""
    import json

    from transformers import AutoConfig

    assert report.binding is not None and report.base_folder is not None
    base = bases.from_folder(report.base_folder, use_cache=False)
    found = config_findings(report.binding, base) + base_config_findings(base.folder, base.config())
    if found:
        report.findings.extend(found)
        require_ok(report)
    folder.mkdir(parents=True)
    text = json.dumps(base.raw_config(), ensure_ascii=False)
    (folder / "config.json").write_text(text, encoding="utf-8")
    try:
        return AutoConfig.from_pretrained(str(folder))
    except (ValueError, OSError, KeyError) as exc:
        raise InputError(
            "transformers cannot build a config from the base's config.json",
            path=str(base.folder / "config.json"), field="model_type",
            expected="a config transformers knows", observed=str(exc)[:200],
            hint="load the base yourself and pass it as model=",
        ) from None  # fmt: skip


def check_loaded_config(model: Any, expected: Any, where: Path | str) -> list[Finding]:
    """No finding when ``model.config`` is ``expected`` (both as ``to_dict()``,
    less ``RUNTIME_CONFIG_KEYS``); else an ``adapter.base-config-differs`` per
    key (a model loaded with ``rms_norm_eps=`` or ``hidden_act=`` overrides)."""
    import json

    def canon(config: Any) -> dict[str, str]:
        d = config.to_dict() if hasattr(config, "to_dict") else {}
        return {k: json.dumps(v, sort_keys=True, default=repr)
                for k, v in d.items() if k not in RUNTIME_CONFIG_KEYS}  # fmt: skip

    def show(text: str | None) -> str:  # a string as it is, anything else as JSON
        if text is None:
            return "absent"
        value = json.loads(text)
        return value if isinstance(value, str) else text

    want, got = canon(expected), canon(getattr(model, "config", None))
    keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    rows = [finding(
        "base-config-differs", f"the loaded base model's config is not the bound "
        f"config.json at {key}", path=str(where), field=key,
        expected=show(want.get(key)), observed=show(got.get(key)),
        hint="load the base without config overrides (no rms_norm_eps=, hidden_act=... "
        "keywords), or let load_bound load it",
    ) for key in keys]  # fmt: skip
    return collapse(rows, SHOWN_KEYS)


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
    assert report.binding is not None and report.base_folder is not None
    shapes = bases.from_folder(report.base_folder).shapes()  # its digest is the bound one
    found = check_loaded_base(model, report.binding.base_tensor_digest, shapes=shapes)
    if found:  # the loaded model is judged against the bound base folder
        report.findings.extend(f._replace(path=f.path or str(report.base_folder)) for f in found)
        require_ok(report)


def check_loaded_base(
    model: Any, expected: str, *, shapes: dict[str, tuple[str, tuple[int, ...]]] | None = None
) -> list[Finding]:
    """No finding when ``model``'s weights (its state dict) have the tensor
    digest ``expected``; else one ``adapter.base-weights-differ``, naming the
    cause when ``shapes`` (the bound base's headers: name -> dtype, shape) show
    it: a dtype cast, a resized vocabulary or another shape."""
    state = model.state_dict()
    records = {name: tensor_record(name, t) for name, t in state.items()}
    digests = set(_digests(records, _alias_groups(state)))
    if expected in digests:
        return []
    cause = _cause(records, shapes or {}, getattr(model, "config", None))
    if cause is not None:
        return [cause]
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


def _cause(
    records: dict[str, TensorRecord], shapes: dict[str, tuple[str, tuple[int, ...]]], config: Any
) -> Finding | None:
    """The first visible reason the loaded weights are not the bound ones."""
    both = sorted(set(records) & set(shapes))
    cast = [n for n in both if records[n].dtype != shapes[n][0]]
    if cast:
        bound = sorted({shapes[n][0] for n in cast})
        seen = sorted({records[n].dtype for n in cast})
        return finding(
            "base-weights-differ", f"the loaded base model's weights are cast to "
            f"{'/'.join(seen)}: the adapter was bound to {'/'.join(bound)} weights (a dtype "
            f"cast, {len(cast)} of {len(records)} tensors)", field="base.dtype",
            expected="/".join(bound), observed="/".join(seen),
            hint=f"load the base in the dtype it was saved in: from_pretrained(..., "
            f"dtype='auto') or no torch_dtype=/dtype= (e.g. {cast[0]} is {shapes[cast[0]][0]})",
        )  # fmt: skip
    for n in both:
        want, got = shapes[n][1], records[n].shape
        if want == got:
            continue
        resized = len(want) == len(got) == 2 and want[1:] == got[1:] and (
            getattr(config, "vocab_size", None) == got[0] or "emb" in n or "wte" in n
            or "lm_head" in n)  # fmt: skip
        why = f" (a resized vocabulary: {want[0]} -> {got[0]} tokens)" if resized else ""
        return finding(
            "base-weights-differ", f"the loaded base model's {n} has shape {list(got)}, "
            f"bound {list(want)}{why}", field=f"{n}.shape" if not resized else "vocab_size",
            expected=str(want[0]) if resized else str(list(want)),
            observed=str(got[0]) if resized else str(list(got)),
            hint="do not resize_token_embeddings the base before loading the adapter: the "
            "adapter was bound to the base's own vocabulary" if resized
            else "load the bound base with the class it was saved from",
        )  # fmt: skip
    return None


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


__all__ = ["AdapterRefusedError", "check_loaded_base", "check_loaded_config", "load_bound",
           "require_loaded_base"]  # fmt: skip
