"""Renderings several command modules print alike: a signature's trusted line
(verify, run, reproduce), the adapter findings table (bind, check-adapter) and a
formatted example's token line (preflight, data sample).

Layer: commands (private to ``ftmanifest.cli``: a command module imports this,
never another command module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftmanifest.output import table
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    from ftmanifest.findings import Finding


def trusted_line(sig: Any) -> str:
    """``trusted (1 key(s): alice@example.org; threshold 1)`` for a signature report."""
    names = sorted({escape(p) for s in sig.signatures if s.status == "valid" for p in s.principals})
    return (
        f"trusted ({len(sig.valid_keyids)} key(s): {', '.join(names)}; threshold {sig.threshold})"
    )


def adapter_table(findings: list[Finding]) -> str:
    """One row per finding: rule, field, expected, observed, severity; the
    message and fix under it (digests shrink in the middle, never wrap)."""

    rows = [
        (f.rule.removeprefix("adapter."), f.field or "-", f.expected or "-", f.observed or "-",
         f.severity)
        for f in findings
    ]  # fmt: skip
    notes = [[("why", f.message), ("fix", f.hint)] for f in findings]
    return table(rows, ("rule", "field", "expected", "observed", "severity"), notes=notes,
                 nowrap=(0, 4))  # fmt: skip


def marked_tokens(ex: dict[str, Any]) -> str:
    """A formatted example's tokens on one line: ``[x]`` carries loss, ``<x>`` a
    special token, ``|`` where the prompt ends."""
    parts = []
    ended = False
    for t in ex["tokens"]:
        if not t["prompt"] and not ended:
            parts.append("|")
            ended = True
        text = escape(str(t["token"]))
        if t["special"]:
            text = f"<{text.strip('<>')}>"
        parts.append(f"[{text}]" if t["loss"] else text)
    if ex["truncated"]:
        parts.append("...(truncated)")
    return " ".join(parts)
