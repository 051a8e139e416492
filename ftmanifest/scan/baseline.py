"""Baseline files: accepted fingerprints with reasons, independent of line numbers.

Layer: core (pure filtering); ``write`` goes through the one atomic writer
(``ftmanifest.fsutil``).  Format (JSON)::

  {"version": 1, "entries": [{"fingerprint": "...", "rule": "secret.jwt",
                              "path": "data/x.jsonl", "reason": "..."}]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import atomic_write_text

VERSION = 1
REASON_PLACEHOLDER = "TODO: say why this finding is accepted"


def load(path: Path) -> dict[str, dict[str, str]]:
    """fingerprint -> entry."""
    if not path.exists():
        raise InputNotFoundError("baseline file does not exist", path=str(path),
                                 hint="create one with --write-baseline")  # fmt: skip
    if not path.is_file():  # a folder, a FIFO (whose open would block) or a device
        raise InputError(
            "baseline is not a regular file",
            path=str(path),
            expected="a JSON baseline file",
            hint="give the path of a file written by --write-baseline",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InputError(
            f"cannot read the baseline file: {reason or exc}",
            path=str(path),
            expected="a JSON baseline file",
            hint="give the path of a file written by --write-baseline",
        ) from None
    try:
        doc = json.loads(text)
        if doc.get("version") != VERSION:
            raise InputError("unsupported baseline version", path=str(path), field="version",
                             expected=str(VERSION), observed=repr(doc.get("version")))  # fmt: skip
        return {e["fingerprint"]: e for e in doc["entries"]}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError("baseline file is not valid", path=str(path), observed=str(exc),
                         hint="regenerate it with --write-baseline") from exc  # fmt: skip


def write(path: Path, findings: Sequence[Finding], previous: dict | None = None) -> int:
    """Write every fingerprinted finding, keeping reasons already given."""
    previous = previous or {}
    entries: dict[str, dict[str, str]] = {}
    for f in findings:
        if f.fingerprint and f.fingerprint not in entries:
            old = previous.get(f.fingerprint, {})
            entries[f.fingerprint] = {
                "fingerprint": f.fingerprint,
                "rule": f.rule,
                "path": f.path or "",
                "reason": old.get("reason", REASON_PLACEHOLDER),
            }
    doc = {
        "version": VERSION,
        "entries": sorted(entries.values(), key=lambda e: (e["path"], e["rule"], e["fingerprint"])),
    }  # noqa: E501
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")
    return len(entries)


def apply(
    findings: Sequence[Finding], accepted: dict[str, dict[str, str]], baseline_path: str
) -> tuple[list[Finding], int]:
    """Drop accepted findings; add an info finding per stale entry."""
    kept = [f for f in findings if not (f.fingerprint and f.fingerprint in accepted)]
    seen = {f.fingerprint for f in findings if f.fingerprint}
    stale = [
        Finding(
            kind="baseline",
            rule="scan.baseline-stale",
            severity="info",
            message=f"baseline entry no longer matches anything ({e.get('rule')} in {e.get('path')})",  # noqa: E501
            path=baseline_path,
            fingerprint=fp,
            hint="remove the entry from the baseline",
        )  # fmt: skip
        for fp, e in accepted.items()
        if fp not in seen
    ]
    return kept + stale, len(findings) - len(kept)
