"""Render findings and errors as text lines, a table, JSON or SARIF 2.1.0.

Layer: edge (printing).  The core returns ``Finding`` records; this module is
the only place that decides how they look.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ftmanifest import __version__
from ftmanifest.findings import Finding

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

FORMATS = ("text", "json", "sarif")

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def line_text(f: Finding) -> str:
    """``file:line:col: RULE message (fix: hint)`` - the compiler-style line."""
    text = f"{f.location()}: {f.rule} "
    if f.field and not f.message.startswith(f.field):
        text += f"{f.field}: "
    text += f.message
    facts = []
    if f.expected is not None:
        facts.append(f"expected {f.expected}")
    if f.observed is not None:
        facts.append(f"observed {f.observed}")
    if facts:
        text += "; " + ", ".join(facts)
    if f.hint:
        text += f" (fix: {f.hint})"
    return text


def lines(findings: Iterable[Finding]) -> str:
    return "".join(line_text(f) + "\n" for f in findings)


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """A plain fixed-width table; cells are cut to keep lines readable."""
    cells = [[_cell(c) for c in header]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def _cell(value: object, limit: int = 60) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def findings_table(findings: Sequence[Finding]) -> str:
    rows = [
        (f.field or f.location(), f.expected, f.observed, f.severity, f.hint or f.message)
        if f.kind == "drift"
        else (f.location(), f.rule, f.excerpt or f.message, f.severity, f.hint or f.message)
        for f in findings
    ]
    return table(rows, ("field", "expected", "observed", "severity", "fix"))


def to_json(payload: Any) -> str:
    return json.dumps(payload, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def findings_json(findings: Sequence[Finding], **summary: Any) -> str:
    return to_json({**summary, "findings": [f.to_dict() for f in findings]})


def findings_sarif(findings: Sequence[Finding], tool: str = "ftmanifest") -> str:
    """A SARIF 2.1.0 log with one run; rules are collected from the findings."""
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for f in findings:
        rules.setdefault(
            f.rule,
            {
                "id": f.rule,
                "name": f.kind,
                "shortDescription": {"text": f.kind},
                "properties": {"category": f.kind},
            },
        )
        region: dict[str, int] = {}
        if f.line is not None:
            region["startLine"] = max(1, f.line)
            if f.column is not None:
                region["startColumn"] = max(1, f.column)
        physical: dict[str, Any] = {"artifactLocation": {"uri": f.path or "-"}}
        if region:
            physical["region"] = region
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": _SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f.message + (f" (fix: {f.hint})" if f.hint else "")},
            "locations": [{"physicalLocation": physical}],
        }
        if f.fingerprint:
            result["partialFingerprints"] = {"ftmanifest/v1": f.fingerprint}
        props = {k: v for k, v in (("field", f.field), ("excerpt", f.excerpt)) if v}
        if props:
            result["properties"] = props
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": tool,
                        "version": __version__,
                        "informationUri": "https://ftmanifest.dev",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
            }
        ],
    }
    return to_json(log)


def render_findings(findings: Sequence[Finding], fmt: str, **summary: Any) -> str:
    """One entry point for commands that report findings."""
    if fmt == "json":
        return findings_json(findings, **summary)
    if fmt == "sarif":
        return findings_sarif(findings)
    return lines(findings)


def lint_report(findings: Sequence[Finding], unusable: int, files: int, fmt: str) -> int:
    """Print a lint run (findings on stdout, a summary on stderr); return its exit code."""
    import sys

    from ftmanifest.errors import EXIT_INPUT, EXIT_OK, EXIT_REFUSED

    sys.stdout.write(render_findings(findings, fmt, files=files, unusable=unusable))
    if fmt == "text":
        bad = len({f.path for f in findings})
        sys.stderr.write(
            f"{len(findings)} problem(s) in {bad} of {files} manifest(s)\n"
            if findings
            else f"{files} manifest(s) pinned, no problems\n"
        )
    if unusable:
        return EXIT_INPUT
    return EXIT_REFUSED if findings else EXIT_OK
