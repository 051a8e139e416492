"""Judge an adapter against a base model: the findings of ``check-adapter``.

Layer: judging rooms - judging core over the edges that read (headers, configs, digests,
the signed binding); returns ``Finding`` records of kind ``adapter``, never
raises on a refusal (only on unusable input).  Rules, each its own refusal:

  adapter.binding-missing      no signed binding beside the adapter
  adapter.binding-unsigned     a binding envelope without a signature
  adapter.binding-untrusted    its signature is refused (reason in ``extra``)
  adapter.binding-malformed    the envelope or its predicate is not a binding
  adapter.files-changed        an adapter file changed, vanished or appeared after binding
  adapter.base-weights-differ  the base's tensor digest is not the bound one
  adapter.manifest-differs     bound under another manifest (error when export.bind asks)
  adapter.method-differs       the adapter's method is not the manifest's: another method
                               (one plain sentence naming both), or for LoRA the resolved
                               wrapped modules, r/alpha per module, dropout, bias, ... and any
                               setting the manifest cannot state; for a declared PEFT method
                               (kind: peft) its peft_type and each key of method.config
                               (``adapter.method``)
  adapter.target-missing / target-not-wrappable / modules-to-save-missing / pattern-invalid /
                               layer-replication-impossible
  adapter.shape-mismatch / unexpected-tensor / missing-tensor   (``architecture``, LoRA only;
                               another method's tensors must name modules of the base)
  adapter.base-rewritten-at-load  init_lora_weights is one peft reruns on load, writing the
                               base's weights (PiSSA, CorDA, OLoRA, LoftQ): convert it first
  adapter.base-revision-differs  same weights, another revision: an error when the
                               binding's export.bind lists base_revision, else a warning
  adapter.base-holds-adapter   adapter_config.json in the base folder (from_pretrained applies it)
  adapter.base-config-indirect config.json lists configuration_files (another file is read)
  adapter.base-files-differ, adapter.base-drifted, adapter.version-differs  (warnings)
  adapter.tokenizer-differs, base-tokenizer-differs, base-generation-differs ...
                               the tokenizer and generation_config.json (``outputs_check``)

Only headers and configs are read, plus the base's bytes once for the tensor
digest (cached by stat): checking a 7B base costs hashing, not loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.adapter import architecture as arch
from ftmanifest.adapter import base as bases
from ftmanifest.adapter import headers, lora_fields
from ftmanifest.adapter import method as methods
from ftmanifest.adapter.architecture import finding
from ftmanifest.adapter.binding import (
    CONFIG_NAME,
    ENVELOPE_NAME,
    Binding,
    adapter_weight_files,
    installed_versions,
    read_config,
)
from ftmanifest.adapter.loadable import adapter_stray_findings
from ftmanifest.adapter.outputs_check import (
    adapter_outputs_findings,
    bound_outputs_findings,
    config_keys,
)
from ftmanifest.adapter.signed import read_signed
from ftmanifest.adapter.tensors import tensor_shapes
from ftmanifest.errors import InputError, RefusedError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest import targets as tg
from ftmanifest.manifest.renamed import renamed_keywords

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest


class AdapterRefusedError(RefusedError):
    """An adapter does not fit the base it is checked against (exit 1); carries the findings."""

    reason = "adapter-refused"


@dataclass
class AdapterReport:
    """What ``check_adapter`` found for an adapter folder (``ok`` when no finding is
    an error); ``require_ok`` turns an error into ``AdapterRefusedError``."""

    adapter_dir: Path
    envelope_path: Path  # the signed binding read (or expected) beside the adapter
    base_folder: Path | None = None  # the base model's folder it was checked against
    binding: Binding | None = None  # what the signed binding states, when it verified
    signers: tuple[str, ...] = ()  # the principals whose signatures on the binding are valid
    findings: list[Finding] = field(default_factory=list)
    tensor_digest: str | None = None  # the base's tensor digest, when it was hashed

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "adapter": str(self.adapter_dir),
            "binding": str(self.envelope_path),
            "base": str(self.base_folder) if self.base_folder else None,
            "base_tensor_digest": self.tensor_digest,
            "bound": self.binding.predicate() if self.binding else None,
            "signers": list(self.signers),
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
        }


@renamed_keywords(manifest_path="manifest")
def check_adapter(
    adapter_dir: str | Path,
    *,
    manifest: str | Path | None = None,
    base_dir: str | Path | None = None,
    base_repo: str | None = None,
    revision: str | None = None,
    base: bases.BaseModel | None = None,
    trust_path: Path | None = None,
    use_cache: bool = True,
    allow_outside: bool = False,
    now: datetime | None = None,
) -> AdapterReport:
    """Every finding for ``adapter_dir`` against the base given (one of
    ``base``, ``base_dir``, ``base_repo``+``revision``, the manifest's base,
    else the base the binding names)."""
    folder = Path(adapter_dir)
    loaded = None
    if manifest is not None:
        loaded = load_manifest(manifest)
    try:
        config = read_config(folder)
        adapter_shapes = tensor_shapes(adapter_weight_files(folder))
        unusable = None
    except InputError as exc:
        unusable = exc
    report = AdapterReport(folder, folder / ENVELOPE_NAME)
    signed = read_signed(folder, search_from=manifest, trust_path=trust_path, now=now,
                         use_cache=use_cache)  # fmt: skip
    report.binding, report.signers = signed.binding, signed.signers
    report.findings += signed.findings
    if unusable is not None:
        if any(f.rule == "adapter.files-changed" for f in report.findings):
            return report  # tampered after binding: the refusal names the file
        raise unusable
    if base is None:
        base = _find_base(report, loaded, manifest, base_dir, base_repo, revision,
                          use_cache, allow_outside)  # fmt: skip
    report.base_folder = base.folder
    where = str(folder)
    report.findings += adapter_stray_findings(folder) + base.stray_findings()
    report.findings += adapter_outputs_findings(folder, base.folder)
    found, tree = structure_findings(config, adapter_shapes, base, where)
    report.findings += found
    if loaded is not None:
        report.findings += manifest_findings(loaded, config, report.binding, where, tree=tree)
    if report.binding is not None:
        report.findings += config_findings(report.binding, base)
        outputs = bound_outputs_findings(report.binding.base_outputs, base.folder)
        sized = size_findings(report.binding, base)
        if sized:  # another byte count: refused from the headers, nothing hashed
            report.findings += sized + outputs
            return report
        report.tensor_digest = base.tensors().digest
        report.findings += base_findings(report.binding, base, report.tensor_digest, where)
        report.findings += outputs
    return report


def size_findings(b: Binding, base: bases.BaseModel) -> list[Finding]:
    """The headers promise another amount of tensor data than was bound."""
    seen = base.tensor_bytes()
    if b.base_bytes is None or seen == b.base_bytes:
        return []
    return [finding(
        "base-weights-differ", "the base's weights are not those the adapter was bound to "
        "(another amount of tensor data; not hashed)", path=str(base.folder),
        field="base.bytes", expected=f"{b.base_bytes} bytes", observed=f"{seen} bytes",
        hint="load the adapter only on its own base",
    )]  # fmt: skip


def config_findings(b: Binding, base: bases.BaseModel) -> list[Finding]:
    """The base's ``config.json`` is the bound one (it decides what the weights become)."""
    seen = base.config_digest()
    if b.base_config_digest is not None and seen == b.base_config_digest:
        return []
    bound = b.base_outputs.config if b.base_outputs else None
    return [finding(
        "base-config-differs", "the base's config.json is not the one the adapter was bound "
        "with" + (config_keys(bound, base.raw_config()) or " (tied embeddings, dtype, rope "
        "scaling, weights file... change what loads)")
        if b.base_config_digest else "the binding does not cover the base's config.json",
        path=str(base.folder / "config.json"), field="base.configDigest",
        expected=b.base_config_digest or "a bound config digest", observed=seen or "absent",
        hint="use the base's config.json as it was when bound, or bind again: "
        "ftmanifest bind ADAPTER --manifest M --key KEY",
    )]  # fmt: skip


def _find_base(
    report: AdapterReport,
    loaded: LoadedManifest | None,
    manifest_path: str | Path | None,
    base_dir: str | Path | None,
    base_repo: str | None,
    revision: str | None,
    use_cache: bool,
    allow_outside: bool,
) -> bases.BaseModel:
    if base_dir is not None:
        return bases.from_folder(base_dir, use_cache=use_cache)
    if base_repo is not None:
        if not revision:
            raise UsageError("--base-repo needs --revision", field="--revision",
                             hint="give the 40-hex commit the adapter was trained on")  # fmt: skip
        return bases.from_hub(base_repo, revision, use_cache=use_cache)
    if loaded is not None:
        mpath = Path(str(manifest_path))
        base, drift = bases.from_manifest(
            loaded.manifest, mpath, use_cache=use_cache, allow_outside=allow_outside
        )
        report.findings += [f._replace(severity="warning") for f in drift]
        return base
    b = report.binding
    if b is not None and b.base_repo and b.base_revision:
        return bases.from_hub(b.base_repo, b.base_revision, use_cache=use_cache)
    raise UsageError(
        "no base model to check the adapter against",
        field="--base",
        expected="--manifest M, --base DIR, or --base-repo ID --revision SHA",
        hint="name the base: ftmanifest check-adapter ADAPTER --base DIR",
    )


def base_findings(b: Binding, base: bases.BaseModel, digest: str, where: str) -> list[Finding]:
    out: list[Finding] = []
    if digest != b.base_tensor_digest:
        named = f" ({b.base_repo}@{b.base_revision})" if b.base_repo else ""
        out.append(finding(
            "base-weights-differ", "the base's weights are not those the adapter was bound to"
            + named, path=str(base.folder), field="base.tensorDigest",
            expected=b.base_tensor_digest, observed=digest,
            hint="load the adapter only on its own base"
            + (f": huggingface-cli download {b.base_repo} --revision {b.base_revision}"
               if b.base_repo else ""),
        ))  # fmt: skip
        return out
    if b.base_revision and base.revision and base.revision != b.base_revision:
        strict = "base_revision" in b.required
        out.append(finding(
            "base-revision-differs", "another revision, with the very same weights",
            "error" if strict else "warning", path=where, field="base.revision",
            expected=b.base_revision, observed=base.revision,
            hint=f"check it against {b.base_repo}@{b.base_revision}, as export.bind asks"
            if strict else "fine for loading; pin the bound revision to be exact",
        ))  # fmt: skip
    if b.base_tree_digest and base.tree_digest and base.tree_digest != b.base_tree_digest:
        out.append(finding(
            "base-files-differ", "the base's files differ (re-saved, re-sharded, a README?) "
            "but the weights, config.json" + (", tokenizer and generation_config.json are "
            "the bound ones" if b.base_outputs else " the model is built from are the bound "
            "ones (the tokenizer and generation_config.json are not bound)"), "warning",
            path=str(base.folder), field="base.treeDigest", expected=b.base_tree_digest,
            observed=base.tree_digest, hint="the model computes as bound" if b.base_outputs
            else "bind again to cover the tokenizer and generation_config.json",
        ))  # fmt: skip
    here = installed_versions()
    for name, bound in sorted(b.versions.items()):
        if bound and here.get(name) and here[name] != bound:
            out.append(finding(
                "version-differs", f"{name} {here[name]} here, {bound} when bound", "warning",
                path=where, field=f"versions.{name}", expected=bound, observed=here[name],
                hint=f"pip install {name}=={bound} to load it exactly as trained",
            ))  # fmt: skip
    return out


def structure_findings(
    config: dict[str, Any], adapter_shapes: headers.Shapes, base: bases.BaseModel, where: str
) -> tuple[list[Finding], tg.Tree]:
    """The adapter's tensors against the base, and the base's module tree (as
    its headers show it) that the method is resolved on.  LoRA: exactly the
    tensors its config implies, each of the shape that fits; another tuner
    method: every tensor belongs to a module of the base; prompt learning
    (no ``base_model.model.`` tensors): nothing to match."""
    shapes = headers.model_namespace(
        adapter_shapes, headers.with_tied_head(base.shapes(), base.config())
    )
    names = headers.to_base_names(adapter_shapes, shapes)
    embeddings = frozenset(n.rpartition(".")[0] for n in names.values()
                           if n.endswith(".lora_embedding_A"))  # fmt: skip
    tree = headers.header_tree(shapes, base.config(), embeddings)
    if methods.peft_type_of(config) != "LORA":
        return tuner_findings(adapter_shapes, shapes, where), tree
    facts = arch.LoraFacts.from_adapter_config(config)
    out = init_findings(config, where)
    out += arch.check_targets(shapes, facts, path=where, config=base.config())
    out += arch.check_adapter_tensors(
        adapter_shapes, shapes, facts,
        transposed=arch.is_transposed(base.config(), facts), path=where,
    )  # fmt: skip
    return out, tree


def init_findings(config: dict[str, Any], where: str) -> list[Finding]:
    """peft reruns a PiSSA/CorDA/OLoRA/LoftQ init when it loads the adapter, and
    that init rewrites the base's weights after their digest was checked."""
    init = lora_fields.base_rewriting_init(config)
    if init is None:
        return []
    return [finding(
        "base-rewritten-at-load", f"peft reruns the {init} init when it loads this adapter, "
        "rewriting the base weights after their digest was checked",
        path=str(Path(where) / CONFIG_NAME), field="init_lora_weights",
        expected="true (plain LoRA on the unchanged base)", observed=init,
        hint="convert it to plain LoRA: save_pretrained(out, path_initial_model_for_weight_"
        "conversion=INIT_DIR) as peft documents, then bind the converted adapter",
    )]  # fmt: skip


def tuner_findings(
    adapter_shapes: headers.Shapes, base: headers.Shapes, where: str
) -> list[Finding]:
    """Every ``base_model.model.<module>...`` tensor of a non-LoRA adapter lies
    in a module of the base (the longest such prefix of its name)."""
    modules = headers.all_modules(base)
    out: list[Finding] = []
    for name in sorted(adapter_shapes):
        if not name.startswith(headers.PEFT_PREFIX):
            continue
        parts = name.removeprefix(headers.PEFT_PREFIX).split(".")[:-1]
        prefixes = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        prefixes |= {".".join(parts[1:i]) for i in range(2, len(parts) + 1)}
        if not prefixes & modules:
            out.append(finding(
                "target-missing", f"{name} belongs to {'.'.join(parts)!r}, a module the base "
                "does not have", path=where, field=name, expected="a module of the base",
                observed=".".join(parts), hint="the adapter belongs to another architecture; "
                "check-adapter it against its own base",
            ))  # fmt: skip
    return arch.collapse(out)


def manifest_findings(
    loaded: LoadedManifest,
    config: dict[str, Any],
    binding: Binding | None,
    where: str,
    *,
    tree: tg.Tree,
) -> list[Finding]:
    """The adapter's method is the manifest's (resolved on ``tree``, the base's
    modules); bound under it."""
    out: list[Finding] = []
    method = loaded.manifest.method
    peft_type = methods.peft_type_of(config)
    if not methods.kind_fits(peft_type, method):
        out.append(finding(
            "method-differs", methods.kind_sentence("this adapter", peft_type, method),
            path=where, loc=("method", "kind"), expected=methods.declared(method),
            observed=f"a {peft_type} adapter", hint=_declare_hint(peft_type, loaded.path),
        ))  # fmt: skip
    elif method is not None and method.kind == "lora":
        expected = tg.resolve(tg.spec_from_method(method), tree)
        observed = tg.resolve(tg.spec_from_config(config), tree)
        diffs = methods.lora_differences(method, config, expected, observed, who="the adapter")
        out += [_row(d, where) for d in diffs]
    else:
        out += [_row(d, where) for d in methods.peft_differences(method, config, who="the adapter")]
    export = loaded.manifest.export
    required = export.bind if export is not None else []
    if binding is not None and binding.manifest_digest != loaded.digest():
        strict = "manifest_digest" in required or "manifest_digest" in binding.required
        out.append(finding(
            "manifest-differs", "the adapter was bound under another manifest",
            "error" if strict else "warning", path=str(loaded.path), field="manifest.digest",
            expected=loaded.digest(), observed=str(binding.manifest_digest),
            hint="check it against the manifest it was trained from, or bind it again",
        ))  # fmt: skip
    return out


def _declare_hint(peft_type: str, manifest_path: Path) -> str:
    if peft_type == "LORA":
        return (
            f"declare method.kind: lora with the adapter's r, alpha and target_modules in "
            f"{manifest_path}, or check it against the manifest it was trained from"
        )
    return (
        f"declare it in {manifest_path}: method: {{kind: peft, peft_type: {peft_type}, config: "
        "{...}}, or check it against the manifest it was trained from"
    )


def _row(d: methods.Difference, where: str) -> Finding:
    extra: dict[str, Any] = {"extra": d.extra} if d.extra else {}
    return finding(
        "method-differs",
        d.message,
        path=where,
        loc=("method", *d.loc),
        expected=d.expected,
        observed=d.observed,
        **extra,
        hint=d.hint
        or "this adapter was trained with another configuration; train it from "
        "this manifest, or check it against its own",
    )


def require_ok(report: AdapterReport) -> AdapterReport:
    """``report``, or ``AdapterRefusedError`` carrying its findings."""
    if report.ok:
        return report
    errors = [f for f in report.findings if f.severity == "error"]
    first = errors[0]
    raise AdapterRefusedError(
        f"adapter refused: {first.message}"
        + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
        path=first.path,
        field=first.field,
        expected=first.expected,
        observed=first.observed,
        hint=first.hint,
        findings=report.findings,
    )
