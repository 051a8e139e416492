"""Fingerprints, redacted excerpts, and ``--redact-to`` copies of text datasets.

Layer: judging rooms - core helpers plus one edge writer (``write_redacted``).  A
fingerprint is a keyed hash of rule id and value (never the value, never its position),
so a baseline survives edits that move the secret; an excerpt keeps at most the first
four characters and the length.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from pathlib import Path

from ftmanifest.errors import RefusedError, UsageError
from ftmanifest.findings import Finding

# A fixed tool constant: fingerprints are stable across machines (baselines are
# shared in a repo) yet cannot be reversed by hashing guesses with plain SHA-256.
_FP_KEY = b"ftmanifest/scan/fingerprint/v1"


def fingerprint(rule: str, value: bytes) -> str:
    return hmac.new(_FP_KEY + rule.encode(), value, hashlib.sha256).hexdigest()[:32]


def excerpt(value: bytes) -> str:
    """``ghp_****…(40 chars)``: at most 4 leading characters and the length."""
    text = value.decode("utf-8", "replace")
    keep = min(4, len(text) // 4)
    return f"{text[:keep]}****…({len(text)} chars)"


def mask(value: bytes, rule: str) -> bytes:
    """Replacement written by ``--redact-to``: same for equal values, no quotes/newlines."""
    return f"[REDACTED:{rule}:{fingerprint(rule, value)[:8]}]".encode()


def redact_bytes(buf: bytes, spans: Iterable[tuple[int, int, str]]) -> bytes:
    """Replace byte spans (start, end, rule) — spans are values, never structure."""
    out, last = [], 0
    for start, end, rule in sorted(spans):
        if start < last:
            continue
        out += [buf[last:start], mask(buf[start:end], rule)]
        last = end
    out.append(buf[last:])
    return b"".join(out)


def check_target(dest_root: Path, scanned: Iterable[Path]) -> None:
    """Refuse to write redacted copies inside a scanned tree."""
    root = dest_root.resolve()
    for src in scanned:
        s = src.resolve()
        base = s if s.is_dir() else s.parent
        if root == base or base in root.parents:
            raise UsageError(
                "--redact-to must not be inside a scanned tree",
                path=str(dest_root),
                observed=str(base),
                hint="choose a directory outside the scanned paths",
            )


def write_copy(dest: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write one redacted copy through the one atomic writer (``ftmanifest.fsutil``),
    owner-only as before: a copy can still hold what no rule recognised."""
    from ftmanifest.fsutil import atomic_write_bytes

    if dest.exists() and not overwrite:
        raise RefusedError(
            "refusing to overwrite an existing file",
            path=str(dest),
            hint="remove it or pass --overwrite",
        )
    atomic_write_bytes(dest, data, mode=0o600, make_parents=True)


def write_redacted(
    src: Path, dest: Path, findings: Iterable[Finding], *, overwrite: bool = False
) -> bool:
    """Write ``src`` with every secret/PII value replaced; False if not redactable.

    Only plain (uncompressed) text files are rewritten; the spans come from the
    findings' ``extra["span"]`` byte offsets, so JSONL stays JSONL and CSV stays
    CSV (a value never contains the quotes, commas or newlines around it).
    """
    spans = [
        (f.extra["span"][0], f.extra["span"][1], f.rule)
        for f in findings
        if f.kind in ("secret", "pii") and "span" in f.extra
    ]
    data = src.read_bytes()
    write_copy(dest, redact_bytes(data, spans), overwrite=overwrite)
    return True
