"""A manifest as a CycloneDX 1.6 ML-BOM (JSON), built from plain dicts.

Layer: judging rooms - pure core (manifest model, lock text and report data in, a dict
out); ``results.export`` reads the files and ``cli/export`` prints or writes.

What goes in: the fine-tuned model (``metadata.component``, type
``machine-learning-model``) with its ``modelCard`` (approach, task, data sets,
and, from an audit, the per-category results and the stated limits) and its
delivered files; the base model with its pinned revision and SHA-256 file
hashes; every data set as a ``data`` component with its licence, and its hash
when the manifest's digest is of one file (a folder's tree digest is a
property: it is no SHA-256 of any one thing); the Python packages of the lock
file and of ``environment.packages`` as ``library`` components with
``pkg:pypi`` purls and the lock's ``--hash`` values.

The output is deterministic: keys and components sorted, no clock (the BOM
has no ``metadata.timestamp``: the manifest states none), and the serial
number is a UUID derived from the manifest digest and the audit's digest.
No CycloneDX library is needed to build it; the tests validate it with the
CycloneDX project's own strict JSON validator.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ftmanifest import __version__

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest

SPEC_VERSION = "1.6"
TOOL = {"type": "application", "name": "ftmanifest", "version": __version__}
_SERIAL_NAMESPACE = uuid.UUID("6f0c1c55-3f0e-5b8e-9a51-66746d616e69")  # fixed for ftmanifest
_SHA256 = re.compile(r"sha256:([0-9a-f]{64})")
# SPDX ids for the licence names a manifest most often gives (Hub spelling, lower case).
SPDX = {
    "apache-2.0": "Apache-2.0",
    "mit": "MIT",
    "bsd-2-clause": "BSD-2-Clause",
    "bsd-3-clause": "BSD-3-Clause",
    "cc0-1.0": "CC0-1.0",
    "cc-by-4.0": "CC-BY-4.0",
    "cc-by-sa-4.0": "CC-BY-SA-4.0",
    "cc-by-nc-4.0": "CC-BY-NC-4.0",
    "gpl-3.0": "GPL-3.0-only",
    "lgpl-3.0": "LGPL-3.0-only",
    "mpl-2.0": "MPL-2.0",
}
# The learning approach (CycloneDX's enum) an objective is; preference objectives
# (dpo, orpo, kto, cpo) are none of the enum's types and state none.
_APPROACH = {
    "trainer": "supervised",
    "sft": "supervised",
    "reward": "supervised",
    "grpo": "reinforcement-learning",
    "rloo": "reinforcement-learning",
}
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(===?\s*([^\s;#]+))?")
_HASH = re.compile(r"--hash[=\s]+sha256:([0-9a-fA-F]{64})")


@dataclass(frozen=True)
class Locked:
    """One requirement of a lock file: name, exact version (or None) and wheel hashes."""

    name: str
    version: str | None
    hashes: tuple[str, ...] = ()


def normalize(name: str) -> str:
    """PEP 503 / purl form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> list[Locked]:
    """The requirements of a pip lock file (``pip freeze``, ``pip-compile
    --generate-hashes``, ``uv pip compile``); option lines are skipped."""
    joined = re.sub(r"\\\r?\n", " ", text)
    out: dict[str, Locked] = {}
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = _REQ.match(line)
        if match is None:
            continue
        name = normalize(match.group(1))
        version = match.group(3)
        hashes = tuple(sorted({h.lower() for h in _HASH.findall(line)}))
        out[name] = Locked(name, version, hashes)
    return [out[k] for k in sorted(out)]


def _hashes(digest: str | None) -> list[dict[str, str]]:
    match = _SHA256.fullmatch(digest or "")
    return [{"alg": "SHA-256", "content": match.group(1)}] if match else []


def _licenses(name: str | None) -> list[dict[str, Any]]:
    if not name or not name.strip():
        return []
    spdx = SPDX.get(name.strip().lower())
    return [{"license": {"id": spdx} if spdx else {"name": name.strip()}}]


def _props(prefix: str, values: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """Flat ``ftmanifest:<prefix>.<key>`` properties of a mapping (values as text)."""
    out = []
    for key, value in (values or {}).items():
        if value is None or value == {} or value == []:
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        out.append({"name": f"ftmanifest:{prefix}{key}", "value": text})
    return out


def _file(path: str, digest: str | None, prefix: str) -> dict[str, Any]:
    comp: dict[str, Any] = {"type": "file", "bom-ref": f"{prefix}{path}", "name": path}
    if hashes := _hashes(digest):
        comp["hashes"] = hashes
    elif digest:
        comp["properties"] = [{"name": "ftmanifest:digest", "value": digest}]
    return comp


def _base_model(m: Manifest) -> dict[str, Any]:
    src = m.model
    comp: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": "base-model",
        "name": src.repo or src.path or "base model",
    }
    if src.revision:
        comp["version"] = src.revision
    if src.repo and "/" in src.repo and src.revision:
        owner, name = src.repo.split("/", 1)
        comp["purl"] = f"pkg:huggingface/{quote(owner)}/{quote(name)}@{src.revision}"
    comp["licenses"] = _licenses(src.license)
    comp["components"] = [_file(f.path, f.digest, "base-model/") for f in src.files]
    comp["properties"] = _props("", {"tree_digest": src.tree_digest})
    return comp


def _data(m: Manifest, kinds: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for entry in m.data:
        # the name quoted ("/" too), so no data set's ref reads as another's script's
        ref = f"data:{quote(entry.name, safe='')}"
        comp: dict[str, Any] = {"type": "data", "bom-ref": ref, "name": entry.name}
        if kinds.get(entry.name) == "file" and (hashes := _hashes(entry.digest)):
            comp["hashes"] = hashes
        comp["licenses"] = _licenses(entry.license)
        scripts = [
            ({**_file(s.path, s.digest, f"{ref}/"), "description": s.description}
             if s.description else _file(s.path, s.digest, f"{ref}/"))
            for s in [*entry.cleaning, *entry.transforms]
        ]  # fmt: skip
        if scripts:
            comp["components"] = scripts
        comp["properties"] = _props(
            "data.",
            {
                "path": entry.path,
                "role": entry.role,
                "format": entry.format,
                "records": entry.records,
                "sealed": entry.sealed or None,
                "contains_personal_data": entry.contains_personal_data,
                "digest": None if "hashes" in comp else entry.digest,
            },
        )
        out.append(comp)
    return out


def _libraries(m: Manifest, locked: Iterable[Locked]) -> list[dict[str, Any]]:
    by_name = {p.name: p for p in locked}
    for name, pin in m.environment.packages.items():
        key = normalize(name)
        exact = re.fullmatch(r"\s*===?\s*([^\s,;]+)\s*", pin)
        if key not in by_name:
            by_name[key] = Locked(key, exact.group(1) if exact else None)
    out = []
    for p in by_name.values():
        purl = f"pkg:pypi/{p.name}" + (f"@{quote(p.version, safe='')}" if p.version else "")
        comp: dict[str, Any] = {"type": "library", "bom-ref": purl, "name": p.name, "purl": purl}
        if p.version:
            comp["version"] = p.version
        if p.hashes:
            comp["hashes"] = [{"alg": "SHA-256", "content": h} for h in p.hashes]
        out.append(comp)
    return out


def _metrics(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    rows = ((report or {}).get("comparison") or {}).get("per_category") or []
    out = []
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        metric = row.get("metric") or "metric"
        where = f"category={row.get('category')}"
        for side in ("baseline", "candidate"):
            if isinstance(row.get(side), (int, float)):
                out.append({"type": f"{metric} ({side})", "value": str(row[side]), "slice": where})
        low, high = row.get("ci_low"), row.get("ci_high")
        if isinstance(row.get("candidate"), (int, float)) and isinstance(
            row.get("baseline"), (int, float)
        ):
            diff: dict[str, Any] = {
                "type": f"{metric} (candidate - baseline)",
                "value": str(row["candidate"] - row["baseline"]),
                "slice": where,
            }
            if isinstance(low, (int, float)) and isinstance(high, (int, float)):
                diff["confidenceInterval"] = {"lowerBound": str(low), "upperBound": str(high)}
            out.append(diff)
    return out


def _model(
    m: Manifest, digest: str, data_refs: Sequence[str], report: Mapping[str, Any] | None
) -> dict[str, Any]:
    objective = m.training.objective.kind if m.training.objective else "sft"
    params: dict[str, Any] = {"task": m.experiment.task} if m.experiment.task else {}
    if objective in _APPROACH:
        params["approach"] = {"type": _APPROACH[objective]}
    if data_refs:
        params["datasets"] = [{"ref": ref} for ref in data_refs]
    card: dict[str, Any] = {"bom-ref": "model-card", "modelParameters": params}
    if metrics := _metrics(report):
        card["quantitativeAnalysis"] = {"performanceMetrics": metrics}
    limits = (report or {}).get("limits")
    if isinstance(limits, str) and limits.strip():
        lines = [line.strip() for line in limits.splitlines() if line.strip()]
        card["considerations"] = {"technicalLimitations": lines}
    kind = m.export.kind if m.export else None
    comp: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": "model",
        "name": m.experiment.id,
        "modelCard": card,
    }
    deliverable = (report or {}).get("deliverable") or {}
    files = [f for f in deliverable.get("files") or [] if isinstance(f, Mapping)]
    if files:
        comp["components"] = [_file(str(f.get("path")), f.get("digest"), "model/") for f in files]
    method = m.method.model_dump(mode="json", exclude_none=True) if m.method else None
    training = m.training.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    binding = deliverable.get("binding")
    tensors = binding.get("base_tensor_digest") if isinstance(binding, Mapping) else None
    comp["properties"] = [
        *_props("", {"manifest_digest": digest, "export.kind": kind}),
        *_props("method.", method),
        *_props("training.", training),
        *_props("audit.", {
            "verdict": (report or {}).get("verdict"),
            "deliverable_tree_digest": deliverable.get("tree_digest"),
            "base_tensor_digest": tensors,
        } if report else None),
    ]  # fmt: skip
    return comp


def serial_number(manifest_digest: str, audit_digest: str | None) -> str:
    """``urn:uuid:`` derived from what the BOM describes: one manifest (and audit), one serial."""
    return uuid.uuid5(_SERIAL_NAMESPACE, f"{manifest_digest}|{audit_digest or ''}").urn


def build_bom(
    m: Manifest,
    digest: str,
    *,
    locked: Iterable[Locked] = (),
    data_kinds: Mapping[str, str] | None = None,
    report: Mapping[str, Any] | None = None,
    audit_digest: str | None = None,
) -> dict[str, Any]:
    """The CycloneDX 1.6 BOM of manifest ``m`` (canonical ``digest``).

    ``data_kinds`` says per data entry whether its path is a ``file`` or a
    ``tree`` here; ``report`` is an audit's report data (``report.load_report_data``).
    """
    data = _data(m, data_kinds or {})
    libraries = _libraries(m, locked)
    base = _base_model(m)
    model = _model(m, digest, [d["bom-ref"] for d in data], report)
    components = sorted([base, *data, *libraries], key=lambda c: str(c["bom-ref"]))
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": serial_number(digest, audit_digest),
        "version": 1,
        "metadata": {
            "tools": {"components": [TOOL]},
            "component": model,
        },
        "components": components,
        "dependencies": [
            {"ref": "model", "dependsOn": sorted(str(c["bom-ref"]) for c in components)}
        ],
    }


def bom_json(bom: Mapping[str, Any]) -> str:
    """The BOM as JSON text: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(bom, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
