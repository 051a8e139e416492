"""The handoff report: JSON, Markdown, one self-contained HTML page and a model card.

Layer: judging rooms - edge (a file writer).  ``audit`` and ``ftmanifest report`` hand
``write_report`` the audit's data; it writes ``handoff.json``,
``handoff.md``, ``handoff.html`` and the Hugging Face model card ``README.md``
(``modelcard``) into ``out_dir``, each atomically.

The HTML needs no network, no external asset and no JavaScript: inline CSS,
inline SVG (``charts``), and a Content-Security-Policy of ``default-src
'none'`` so that nothing could be fetched even if something slipped in.
Every string from a run (file names, findings, excerpts, configuration) is
untrusted: Jinja2 autoescapes the HTML, the Markdown filters escape
Markdown and HTML, and ``safe_text.escape`` makes control and BiDi
characters visible in both.  The JSON keeps the exact values; the Markdown
and the HTML, which are handed on, show no absolute path of the machine that
made them (``portable``).

Input (every section may be missing or ``None``; it then reads "not
available")::

    {"manifest": {"path", "digest"},
     "signature": {...} | None,             # shown as key/value rows
     "experiment": {"id", "task", "hypothesis"} | None,     # the model card only
     "deliverable": {"path", "kind", "tree_digest", "files": [{"path", "digest", "size"}],
                     "binding": {...} | None, "config": {...}},
     "model": {"repo" | "path", "revision", "tree_digest", "license"},
     "environment": {...},
     "data": [{"name", "path", "digest", "records", "license"}],
     "training": {...} | None,              # the recipe (the model card only)
     "comparison": {"guards": [{"name", "verdict", "detail"}],
                    "per_category": [{"category", "metric", "baseline", "candidate",
                                      "max_drop", "ci_low", "ci_high", "verdict"}],
                    "changed_examples": {"<category>": {"improved": [ids],
                                                        "regressed": [ids]}}} | None,
     "findings": [Finding.to_dict(), ...],
     "history": {"ledger", "attempts", "outcomes", "over budget", ...} | None,
     "limits": "free text" | None,
     "verdict": "ready" | "refused"}

``ci_low``/``ci_high`` bound the paired-bootstrap difference candidate minus
baseline; the tolerance of a category is ``baseline - max_drop``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.output import to_json
from ftmanifest.results.charts import category_chart
from ftmanifest.results.mdtext import code as _code
from ftmanifest.results.mdtext import md as _md
from ftmanifest.results.mdtext import num as _num
from ftmanifest.results.mdtext import portable
from ftmanifest.results.modelcard import CARD_PATH, render_model_card, secrets_in
from ftmanifest.safe_text import escape
from ftmanifest.untrusted import read_untrusted

TEMPLATES = Path(__file__).parent / "templates"
EXAMPLES_SHOWN = 50  # changed example ids listed per category and direction


@dataclass(frozen=True)
class ReportPaths:
    """Where the three renderings of one report were written."""

    json: Path
    markdown: Path
    html: Path
    model_card: Path
    redacted: int = 0  # values the model card masked (``modelcard``)

    def to_dict(self) -> dict[str, str]:
        return {
            "json": str(self.json),
            "markdown": str(self.markdown),
            "html": str(self.html),
            "model_card": str(self.model_card),
        }


def _text(value: object) -> str | None:
    """Untrusted value as one visible line of text (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return escape(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    return value if isinstance(value, Mapping) and value else None


def _rows(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [row for row in value if isinstance(row, Mapping)]


def _pairs(value: object) -> list[tuple[str, str]] | None:
    """A mapping as (key, value) rows of visible text, or None when empty."""
    if not isinstance(value, Mapping) or not value:
        return None
    return [(_text(str(k)) or "", _text(v) or "") for k, v in value.items()]


def _clean_row(row: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The named fields of ``row``: numbers kept, everything else as visible text."""
    out: dict[str, Any] = {}
    for key in keys:
        value = row.get(key)
        keep = isinstance(value, (int, float)) and not isinstance(value, bool)
        out[key] = value if keep else _text(value)
    return out


def _ids(value: object) -> dict[str, Any]:
    ids = (
        [_text(v) or "" for v in value]
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes))
        else []
    )
    return {
        "shown": ids[:EXAMPLES_SHOWN],
        "more": max(0, len(ids) - EXAMPLES_SHOWN),
        "count": len(ids),
    }


def _comparison(value: object) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or not value:
        return None
    per_category = [
        _clean_row(
            r, ("category", "baseline", "candidate", "max_drop", "ci_low", "ci_high", "verdict")
        )
        for r in _rows(value.get("per_category"))
    ]
    changed_raw = value.get("changed_examples")
    changed = []
    if isinstance(changed_raw, Mapping):
        for category, sides in changed_raw.items():
            sides = sides if isinstance(sides, Mapping) else {}
            changed.append(
                {
                    "category": _text(str(category)),
                    "improved": _ids(sides.get("improved")),
                    "regressed": _ids(sides.get("regressed")),
                }
            )
    return {
        "guards": [
            _clean_row(g, ("name", "verdict", "detail")) for g in _rows(value.get("guards"))
        ],
        "per_category": per_category,
        "changed": changed,
        "chart": Markup(category_chart(_rows(value.get("per_category")))),  # noqa: S704
    }


def _finding(row: Mapping[str, Any]) -> dict[str, Any]:
    where = [str(row[k]) for k in ("path", "line", "column") if row.get(k) is not None]
    out = _clean_row(
        row,
        ("severity", "kind", "rule", "message", "field", "expected", "observed", "hint", "excerpt"),
    )
    out["severity"] = out["severity"] or "error"
    out["location"] = escape(":".join(where)) if where else None
    return out


def build_context(data: Mapping[str, Any]) -> dict[str, Any]:
    """What the templates see: every section present (None when not available),
    every untrusted string already made visible."""
    findings = [_finding(f) for f in _rows(data.get("findings"))]
    comparison = _comparison(data.get("comparison"))
    deliverable = _section(data, "deliverable")
    limits = data.get("limits")
    verdict = data.get("verdict")
    return {
        "verdict": verdict if verdict in ("ready", "refused") else "unknown",
        "manifest": _pairs(_section(data, "manifest")),
        "signature": _pairs(_section(data, "signature")),
        "deliverable": None
        if deliverable is None
        else {
            "path": _text(deliverable.get("path")),
            "files": [
                _clean_row(f, ("path", "digest", "size")) for f in _rows(deliverable.get("files"))
            ],
            "binding": _pairs(deliverable.get("binding")),
            "config": _pairs(deliverable.get("config")),
        },
        "model": _pairs(_section(data, "model")),
        "environment": _pairs(_section(data, "environment")),
        "data": [
            _clean_row(d, ("name", "path", "digest", "records", "license"))
            for d in _rows(data.get("data"))
        ]
        or None,
        "comparison": comparison,
        "findings": findings,
        "history": _pairs(_section(data, "history")),
        "counts": {
            s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")
        },
        "failed_guards": [
            g
            for g in (comparison or {}).get("guards", [])
            if str(g.get("verdict") or "").lower() not in ("pass", "passed", "ok")
        ],
        "limits": [escape(line) for line in limits.splitlines()]
        if isinstance(limits, str) and limits.strip()
        else None,
    }


def _environment(*, html: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = _num
    env.filters["md"] = _md
    env.filters["code"] = _code
    return env


def render_html(data: Mapping[str, Any]) -> str:
    """The page; no absolute path of this machine in it (``portable``)."""
    context = build_context(portable(data))
    return _environment(html=True).get_template("report.html.j2").render(context)


def render_markdown(data: Mapping[str, Any]) -> str:
    """The Markdown; no absolute path of this machine in it (``portable``)."""
    context = build_context(portable(data))
    return _environment(html=False).get_template("report.md.j2").render(context)


def render_json(data: Mapping[str, Any]) -> str:
    """The data as given; a value JSON cannot hold (a path, a date) as its text."""
    return to_json(json.loads(json.dumps(data, default=str)))


MAX_AUDIT_BYTES = 64 << 20


def load_report_data(path: str | Path) -> dict[str, Any]:
    """The report's data from a saved audit JSON: the object itself, or its
    ``report`` member when the audit wrapped it.  Unusable input is an
    ``InputError`` (exit 2) naming the file."""
    path = Path(path)
    try:  # never blocks on a FIFO, refuses what is not a regular file, capped
        raw = read_untrusted(
            path, limit=MAX_AUDIT_BYTES, what="audit file", hint="give the JSON that audit wrote"
        )
    except FileNotFoundError:
        raise InputNotFoundError(
            "audit file not found", path=str(path), hint="give the JSON that audit wrote"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys(_duplicate))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(
            f"not a JSON audit file: {escape(str(exc))}",
            path=str(path),
            hint="give the JSON that `ftmanifest audit --format json` wrote",
        ) from None
    if isinstance(value, dict) and "report" in value:
        value = _of_type(path, "report", value["report"], dict)
    if not isinstance(value, dict):
        raise InputError(
            "an audit file holds a JSON object",
            path=str(path),
            expected="an object",
            observed=type(value).__name__,
        )
    for name, kind in _SECTIONS.items():
        _of_type(path, name, value.get(name), kind)
    for name in ("data", "findings"):
        for i, row in enumerate(value.get(name) or ()):
            _of_type(path, f"{name}[{i}]", row, dict)
    return value


# The report's sections and their JSON types (each may also be missing or null): a
# section of another type is refused, not rendered as "not available" or crashed on.
_SECTIONS: dict[str, type] = {
    **dict.fromkeys(
        ("manifest", "signature", "experiment", "deliverable", "model", "environment",
         "training", "comparison", "history"),
        dict,
    ),
    **dict.fromkeys(("data", "findings"), list),
    **dict.fromkeys(("limits", "verdict"), str),
}  # fmt: skip
_JSON_NAMES: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}


def _of_type(path: Path, name: str, value: Any, kind: type) -> Any:
    if value is None or isinstance(value, kind):
        return value
    raise InputError(
        f"the audit's {name} is not {_JSON_NAMES[kind]}",
        path=str(path),
        field=name,
        expected=f"{_JSON_NAMES[kind]} (or null), as `ftmanifest audit --format json` writes it",
        observed=type(value).__name__,
        hint="give the JSON that `ftmanifest audit --format json` wrote, unedited",
    )


def _duplicate(key: str) -> ValueError:
    return ValueError(f"duplicate key {key!r}")


def write_report(data: Mapping[str, Any], out_dir: Path, *, mode: int = 0o644) -> ReportPaths:
    """Render ``data`` and write the three files and the model card (``README.md``,
    ``modelcard``) into ``out_dir`` (created if missing).  Everything is rendered
    before anything is written: data holding a secret (``secrets_in``), or a card
    the scan refuses, leaves no file behind."""
    out_dir = Path(out_dir)
    secrets_in(data)
    card = render_model_card(data)
    paths = ReportPaths(
        out_dir / "handoff.json",
        out_dir / "handoff.md",
        out_dir / "handoff.html",
        out_dir / CARD_PATH,
        card.redacted,
    )
    texts = (render_json(data), render_markdown(data), render_html(data), card.text)
    targets = (paths.json, paths.markdown, paths.html, paths.model_card)
    for path, text in zip(targets, texts, strict=True):
        atomic_write_text(path, text, mode=mode, make_parents=True)
    return paths
