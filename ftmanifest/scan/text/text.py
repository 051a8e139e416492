"""Scan one buffer or string for secrets and personal data.

Layer: judging rooms - pure core.  ``scan_buffer`` turns the matcher's confirmed hits
into ``Finding`` records (line and column are computed only for hits; buffers are chunks
of a file, not lines); ``scan_text`` is the entry point for strings found inside pickles
and safetensors metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.scan.redact import excerpt, fingerprint
from ftmanifest.scan.text.matcher import engine_name, matcher

__all__ = ["engine_name", "scan_buffer", "scan_text"]


def scan_buffer(
    buf: bytes,
    *,
    path: str,
    secrets: bool = True,
    pii: bool = True,
    base_line: int = 1,
    base_offset: int = 0,
    line: int | None = None,
    extra: Mapping[str, Any] | None = None,
    engine: str | None = None,
) -> list[Finding]:
    """Scan one buffer; lines count from ``base_line`` unless ``line`` pins them."""
    if not (secrets or pii) or not buf:
        return []
    hits = sorted(matcher(secrets, pii, engine).hits(buf), key=lambda h: h[1].start(h[2]))
    findings = []
    nl, counted, line_no = -1, 0, base_line
    for rule, m, g in hits:
        start, end = m.start(g), m.end(g)
        line_no += buf.count(b"\n", counted, start)
        counted = start
        nl = buf.rfind(b"\n", 0, start)
        column = len(buf[nl + 1 : start].decode("utf-8", "ignore")) + 1
        value = m.group(g)
        info = dict(extra or {})
        info["span"] = [base_offset + start, base_offset + end]
        findings.append(
            Finding(
                kind=rule.kind,
                rule=rule.id,
                message=f"{rule.description} found",
                path=path,
                line=line if line is not None else line_no,
                column=None if line is not None else column,
                severity=rule.severity,  # type: ignore[arg-type]
                hint="remove it, rotate it if it is a credential, or accept it in a baseline",
                fingerprint=fingerprint(rule.id, value),
                excerpt=excerpt(value),
                extra=info,
            )
        )
    return findings


def scan_text(
    text: str,
    *,
    path: str,
    secrets: bool = True,
    pii: bool = True,
    line: int | None = None,
    extra: dict | None = None,
) -> list[Finding]:
    """Scan one string (a pickle string, a safetensors metadata value...).

    ``line`` pins every finding to that line (columns are then omitted);
    ``extra`` (``{"offset": n}``, ``{"metadata_key": k}``) is copied into each.
    """
    return scan_buffer(
        text.encode("utf-8", "surrogatepass"),
        path=path,
        secrets=secrets,
        pii=pii,
        line=line,
        extra=extra,
    )
