"""The hand-off as a Hugging Face model card: ``README.md`` with YAML front matter.

Layer: judging rooms - pure core (report data in, text out); ``report.write_report``
writes it beside the handoff files.  The front matter holds what the Hub's model-card
metadata defines (``base_model``, ``base_model_relation``, ``library_name``,
``license``, ``pipeline_tag``, ``tags``) and, under the ``ftmanifest`` key the Hub
ignores, what it has no field for: the base model's pinned revision and tree digest, the
manifest digest, the binding, the data sets with their digests and licences.
``datasets`` is left out: the Hub reads it as Hub data set ids, and a manifest's data
are local files (they are described in the body instead).

A card is published, so it is built from ``portable`` data (no path of this
machine), and every string in it is scanned with ftmanifest's own secret and
personal-data rules before it is written.  A secret anywhere in the report's
data refuses the whole hand-off (``secrets_in``, called by ``write_report``):
the handoff files would carry it too, and a masked card would hide that the
manifest or the audit leaks one.  Personal data (an author's address) is
masked in the card only (``[REDACTED:rule:fingerprint]``), and the card says
how many values were; the finished card is scanned again, as written and as a
reader sees it (Markdown escapes removed), and refused (``RefusedError``) if
anything is still found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ftmanifest.errors import RefusedError
from ftmanifest.results.mdtext import code as _code
from ftmanifest.results.mdtext import md as _md
from ftmanifest.results.mdtext import num as _num
from ftmanifest.results.mdtext import portable
from ftmanifest.scan.redact import excerpt, redact_bytes
from ftmanifest.scan.text.text import scan_buffer

CARD_PATH = "README.md"

# Hub licence ids (https://huggingface.co/docs/hub/repositories-licenses) a manifest
# most often names; any other licence becomes `license: other` with `license_name`.
HUB_LICENSES = frozenset(
    "apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 "
    "bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause "
    "bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 "
    "cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 "
    "cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0 "
    "cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 "
    "eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research "
    "intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0 "
    "openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license "
    "fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4 gemma "
    "unknown other".split()
)
# peft's TaskType -> the Hub's pipeline tag; without one the card says text-generation.
PIPELINES = {
    "CAUSAL_LM": "text-generation",
    "SEQ_2_SEQ_LM": "text2text-generation",
    "SEQ_CLS": "text-classification",
    "TOKEN_CLS": "token-classification",
    "QUESTION_ANS": "question-answering",
    "FEATURE_EXTRACTION": "feature-extraction",
}


@dataclass(frozen=True)
class ModelCard:
    """The card's text and how many values were redacted from it."""

    text: str
    redacted: int


class HandoffSecretError(RefusedError):
    """The hand-off's data carries a secret (a token in the manifest's or the
    audit's free text): nothing is written until it is removed at its source."""

    reason = "handoff-secret"


def _secret_rows(value: Any, where: str) -> list[tuple[str, str, str]]:
    """(field, rule, redacted excerpt) of every secret in ``value``'s strings."""
    if isinstance(value, str):
        found = scan_buffer(value.encode("utf-8", "surrogatepass"), path=CARD_PATH)
        return [(where, f.rule or "secret", f.excerpt or "") for f in found if _is_secret(f.rule)]
    if isinstance(value, Mapping):
        rows = []
        for key, item in value.items():
            field = f"{where}.{key}" if where else str(key)
            rows += _secret_rows(str(key), field) + _secret_rows(item, field)
        return rows
    if isinstance(value, (list, tuple)):
        return [row for i, item in enumerate(value) for row in _secret_rows(item, f"{where}[{i}]")]
    return []


def _is_secret(rule: str | None) -> bool:
    return not (rule or "").startswith("pii.")


def secrets_in(data: Mapping[str, Any]) -> None:
    """Refuse (``HandoffSecretError``) report data any string of which holds a
    secret; each is named by its field, rule and a redacted excerpt."""
    rows = _secret_rows(portable(data), "")
    if rows:
        field, rule, shown = rows[0]
        raise HandoffSecretError(
            f"the hand-off would carry {len(rows)} secret(s): "
            + "; ".join(f"{f}: {r} ({e})" for f, r, e in rows[:5]),
            field=field,
            expected="no secret in the manifest, the audit or the results a hand-off shows",
            observed=f"{rule}: {shown}",
            hint="remove the secret where it was written (the manifest's notes, a category name, "
            "the results file), revoke it if it was real, then audit and report again",
        )


def redact_values(value: Any) -> tuple[Any, int]:
    """``value`` with every secret- or personal-data-shaped span of its strings
    masked, and how many were."""
    counter = [0]
    return _redact(value, counter), counter[0]


def _redact(value: Any, counter: list[int]) -> Any:
    """``value`` with every secret- or personal-data-shaped span of its strings masked."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        found = scan_buffer(raw, path=CARD_PATH)
        if not found:
            return value
        counter[0] += len(found)
        spans = [(f.extra["span"][0], f.extra["span"][1], f.rule or "secret") for f in found]
        return redact_bytes(raw, spans).decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return {_redact(str(k), counter): _redact(v, counter) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, counter) for v in value]
    return value


def _get(data: Mapping[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _list(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _license(value: Any) -> dict[str, str]:
    if not isinstance(value, str) or not value.strip():
        return {"license": "unknown"}
    lowered = value.strip().lower()
    if lowered in HUB_LICENSES:
        return {"license": lowered}
    slug = "-".join("".join(c if c.isalnum() else " " for c in lowered).split())[:64]
    return {"license": "other", "license_name": slug or "unnamed"}


def front_matter(data: Mapping[str, Any]) -> dict[str, Any]:
    """The card's metadata, as ``huggingface_hub.ModelCardData`` reads it."""
    deliverable = _get(data, "deliverable") or {}
    method = _get(deliverable, "config") or {}
    kind = deliverable.get("kind") if isinstance(deliverable, Mapping) else None
    adapter = kind == "adapter" or (kind is None and _get(method, "kind") in ("lora", "peft"))
    task_type = _get(method, "config", "task_type")
    meta: dict[str, Any] = {}
    repo = _get(data, "model", "repo")
    if isinstance(repo, str) and repo:
        meta["base_model"] = repo
        meta["base_model_relation"] = "adapter" if adapter else "finetune"
    meta["library_name"] = "peft" if adapter else "transformers"
    meta.update(_license(_get(data, "model", "license")))
    meta["pipeline_tag"] = PIPELINES.get(str(task_type), "text-generation")
    tags = ["ftmanifest"]
    for tag in (_get(method, "kind"), _get(data, "experiment", "task")):
        if isinstance(tag, str) and tag and tag not in tags:
            tags.append(tag)
    meta["tags"] = tags
    meta["ftmanifest"] = {
        "verdict": data.get("verdict"),
        "manifest_digest": _get(data, "manifest", "digest"),
        "base_model": {
            "repo": repo,
            "path": None if repo else _get(data, "model", "path"),
            "revision": _get(data, "model", "revision"),
            "tree_digest": _get(data, "model", "tree_digest"),
        },
        "deliverable_tree_digest": _get(deliverable, "tree_digest"),
        "base_tensor_digest": _get(deliverable, "binding", "base_tensor_digest"),
        "data": [
            {k: d.get(k) for k in ("name", "role", "digest", "records", "license")}
            for d in _list(data.get("data"))
        ],
    }
    return meta


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return ["not available", ""]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _pairs(value: Any) -> list[list[str]]:
    if not isinstance(value, Mapping):
        return []
    return [[_md(k), _code(_show(v))] for k, v in value.items() if v not in (None, {}, [])]


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _article(kind: Any) -> str:
    return {"adapter": "An adapter", "model": "A model", "merged": "A merged model"}.get(
        str(kind), "A deliverable"
    )


def _body(data: Mapping[str, Any], redacted: int) -> list[str]:
    model = _get(data, "model") or {}
    deliverable = _get(data, "deliverable") or {}
    name = _get(data, "experiment", "id") or "fine-tuned model"
    base = model.get("repo") or model.get("path") or "the base model"
    out = [f"# {_md(name)}", ""]
    out += [
        f"{_article(_get(deliverable, 'kind'))} fine-tuned from "
        f"{_code(base)} at revision {_code(model.get('revision'))}, handed off with "
        "ftmanifest: every value below comes from the signed manifest and the audit of "
        f"the run. Hand-off verdict: **{_md(data.get('verdict') or 'unknown')}**.",
        "",
    ]
    hypothesis = _get(data, "experiment", "hypothesis")
    if hypothesis:
        out += ["## Hypothesis", "", _md(hypothesis), ""]
    out += ["## Base model", ""]
    out += _table(["field", "value"], _pairs(model))
    out += ["## Method", ""] + _table(["field", "value"], _pairs(_get(deliverable, "config")))
    out += ["## Recipe", ""] + _table(["field", "value"], _pairs(_get(data, "training")))
    out += ["## Data", ""]
    out += _table(
        ["name", "role", "records", "digest", "licence", "personal data"],
        [
            [_md(d.get("name")), _md(d.get("role")), _num(d.get("records")),
             _code(d.get("digest")), _md(d.get("license")),
             _md(_show(d.get("contains_personal_data")))]
            for d in _list(data.get("data"))
        ],
    )  # fmt: skip
    comparison = _get(data, "comparison") or {}
    out += [
        "## Results against the baseline",
        "",
        "Per category; the interval bounds the paired-bootstrap difference candidate "
        "minus baseline.",
        "",
    ]
    out += _table(
        ["category", "metric", "baseline", "candidate", "difference interval", "max drop",
         "verdict"],
        [
            [_md(r.get("category")), _md(r.get("metric")), _num(r.get("baseline")),
             _num(r.get("candidate")), f"[{_num(r.get('ci_low'))}, {_num(r.get('ci_high'))}]",
             _num(r.get("max_drop")), _md(r.get("verdict"))]
            for r in _list(_get(comparison, "per_category"))
        ],
    )  # fmt: skip
    out += ["## Guards", ""]
    out += _table(
        ["guard", "verdict", "detail"],
        [
            [_md(g.get("name")), _md(g.get("verdict")), _md(g.get("detail"))]
            for g in _list(_get(comparison, "guards"))
        ],
    )
    limits = data.get("limits")
    out += ["## Observed limits", ""]
    if isinstance(limits, str) and limits.strip():
        out += [f"- {_md(line)}" for line in limits.splitlines() if line.strip()] + [""]
    else:
        out += ["none stated", ""]
    findings = _list(data.get("findings"))
    errors = sum((f.get("severity") or "error") == "error" for f in findings)
    out += [f"The audit listed {len(findings)} finding(s), {errors} of them error(s).", ""]
    out += ["## Provenance", ""]
    binding = _get(deliverable, "binding") or {}
    out += _table(
        ["what", "digest or value"],
        [
            ["manifest digest", _code(_get(data, "manifest", "digest"))],
            ["base model tree digest", _code(model.get("tree_digest"))],
            ["deliverable tree digest", _code(_get(deliverable, "tree_digest"))],
            ["binding: base tensor digest", _code(_get(binding, "base_tensor_digest"))],
            ["binding: signers", _md(", ".join(map(str, _get(binding, "signers") or [])) or None)],
            ["binding checked", _md(_show(_get(binding, "ok")))],
        ],
    )
    files = _list(_get(deliverable, "files"))
    if files:
        out += _table(
            ["file", "digest", "bytes"],
            [[_code(f.get("path")), _code(f.get("digest")), _num(f.get("size"))] for f in files],
        )
    if redacted:
        out += [
            "## Redactions",
            "",
            f"{redacted} value(s) that looked like a secret or personal data were replaced "
            "by `[REDACTED:rule:fingerprint]`; the audit JSON keeps the originals.",
            "",
        ]
    return out


def render_model_card(data: Mapping[str, Any]) -> ModelCard:
    """The card for a report's ``data`` (the shape ``write_report`` takes)."""
    counter = [0]
    clean = _redact(portable(data), counter)
    meta = yaml.safe_dump(front_matter(clean), sort_keys=False, allow_unicode=True, width=10**6)
    text = "---\n" + meta + "---\n\n" + "\n".join(_body(clean, counter[0])).rstrip() + "\n"
    # what a reader sees, too: a Markdown escape (`ghp\_...`) hides a token from a raw scan
    shown = re.sub(r"\\(.)", r"\1", text)
    left = [
        f
        for t in (text, shown)
        for f in scan_buffer(t.encode("utf-8", "surrogatepass"), path=CARD_PATH)
    ]
    if left:
        raise RefusedError(
            f"the model card still holds {len(left)} value(s) the scan flags after redaction",
            path=CARD_PATH,
            field=left[0].rule,
            expected="no secret or personal data in a published card",
            observed=left[0].excerpt or excerpt(b""),
            hint="remove the value from the manifest or the audit's free text and report again",
        )
    return ModelCard(text, counter[0])
