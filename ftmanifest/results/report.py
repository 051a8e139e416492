"""The handoff report: JSON, Markdown and one self-contained HTML page (issue 13).

Layer: edge (a file writer).  ``audit`` and ``ftmanifest report`` hand
``write_report`` the audit's data; it writes ``handoff.json``,
``handoff.md`` and ``handoff.html`` into ``out_dir``, each atomically.

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
     "deliverable": {"path", "files": [{"path", "digest", "size"}],
                     "binding": {...} | None, "config": {...}},
     "model": {"repo" | "path", "revision", "tree_digest", "license"},
     "environment": {...},
     "data": [{"name", "path", "digest", "records", "license"}],
     "comparison": {"guards": [{"name", "verdict", "detail"}],
                    "per_category": [{"category", "baseline", "candidate",
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
import os
import re
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
from ftmanifest.safe_text import escape

TEMPLATES = Path(__file__).parent / "templates"
EXAMPLES_SHOWN = 50  # changed example ids listed per category and direction
_MD_SPECIAL = set("\\`*_{}[]<>|!&#")
# What GFM's autolink extension turns into a link in plain text.
_AUTOLINK = re.compile(
    r"(?i)(?:\b(?:https?|ftp)://|\bwww\.|\b(?:mailto|xmpp):)\S*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
)


@dataclass(frozen=True)
class ReportPaths:
    """Where the three renderings of one report were written."""

    json: Path
    markdown: Path
    html: Path

    def to_dict(self) -> dict[str, str]:
        return {"json": str(self.json), "markdown": str(self.markdown), "html": str(self.html)}


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


def _num(value: object, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "n/a" if value is None else str(value)
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _md(value: object) -> str:
    """Free text for Markdown: no emphasis, link, HTML or table cell break survives.

    GitHub-flavoured Markdown also links bare URLs, ``www.`` names and e-mail
    addresses in plain text (its autolink extension), which no escape stops:
    those are set as code spans, where nothing is a link.
    """
    text = "n/a" if value is None else str(value)
    out, pos = [], 0
    for m in _AUTOLINK.finditer(text):
        out.append(_escape_md(text[pos : m.start()]))
        out.append(_code(m.group()))
        pos = m.end()
    out.append(_escape_md(text[pos:]))
    return "".join(out)


def _escape_md(text: str) -> str:
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in text)


def _code(value: object) -> str:
    """A value as a Markdown code span: nothing inside is interpreted."""
    if value is None:
        return "n/a"
    text = str(value).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


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


# An absolute POSIX path in a value or inside a sentence: a slash that follows no
# word, path or URL character, up to the next space, quote or separator.
_ABSOLUTE = re.compile(r"(?<![\w.~/:@-])/[^\s\"'`,;()<>|]+")
_KEPT = 2  # trailing components kept of a path outside the project and home


def portable(value: Any, base: str | None = None, home: str | None = None) -> Any:
    """``value`` with no absolute path of this machine in it, for the readable
    renderings a report is handed on with: a path under ``base`` (default: the
    working folder, where the audit's own relative paths start) becomes relative
    to it, one under ``home`` starts with ``~/``, any other keeps its last two
    names (at most) behind ``.../``.  Strings anywhere in dicts and lists are rewritten,
    sentences included; URLs and relative paths are left as they are."""
    base = os.path.abspath(base or os.getcwd())
    home = os.path.abspath(home or os.path.expanduser("~"))

    def short(match: re.Match[str]) -> str:
        path = match.group()
        real = os.path.normpath(path)
        for root, lead in ((base, ""), (home, "~/")):
            for form in {root, os.path.realpath(root)}:
                if real == form:
                    return "." if not lead else "~"
                if real.startswith(form.rstrip("/") + "/"):
                    return lead + os.path.relpath(real, form)
        return ".../" + "/".join([n for n in real.split("/") if n][-_KEPT:])

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return _ABSOLUTE.sub(short, item)
        if isinstance(item, Mapping):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)


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
    from ftmanifest.untrusted import read_untrusted

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
    if isinstance(value, dict) and isinstance(value.get("report"), dict):
        value = value["report"]
    if not isinstance(value, dict):
        raise InputError(
            "an audit file holds a JSON object",
            path=str(path),
            expected="an object",
            observed=type(value).__name__,
        )
    return value


def _duplicate(key: str) -> ValueError:
    return ValueError(f"duplicate key {key!r}")


def write_report(data: Mapping[str, Any], out_dir: Path, *, mode: int = 0o644) -> ReportPaths:
    """Render ``data`` and write the three files into ``out_dir`` (created if missing)."""
    out_dir = Path(out_dir)
    paths = ReportPaths(out_dir / "handoff.json", out_dir / "handoff.md", out_dir / "handoff.html")
    texts = (render_json(data), render_markdown(data), render_html(data))
    for path, text in zip((paths.json, paths.markdown, paths.html), texts, strict=True):
        atomic_write_text(path, text, mode=mode, make_parents=True)
    return paths
