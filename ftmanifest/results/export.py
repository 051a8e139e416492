"""``export``: read a manifest, its lock file and an audit, and build the ML-BOM.

Layer: judging rooms - edge (reads files; ``mlbom`` builds, ``cli/export`` prints or
writes).  A manifest that does not lint is refused: a bill of materials of unpinned
things names nothing.  A lock file the manifest names must be here with the digest the
manifest pins; an audit must be of this manifest.  Each refusal names the file, the
field, what was expected and what was found.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError, InputNotFoundError, RefusedError
from ftmanifest.lint import lint_document
from ftmanifest.manifest import load_manifest
from ftmanifest.results.mlbom import bom_json, build_bom, parse_lock
from ftmanifest.results.modelcard import redact_values, secrets_in
from ftmanifest.results.report import load_report_data
from ftmanifest.untrusted import read_untrusted

FORMATS = ("cyclonedx",)
MAX_LOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class Exported:
    """The exported text and how many values in it were masked as personal data."""

    text: str
    redacted: int


def _lock_text(manifest_path: Path, ref: Any) -> str:
    path = manifest_path.parent / ref.path
    shown = str(path)
    hint = "put the lock file beside the manifest, or run `ftmanifest lock` to pin what is here"
    try:
        raw = read_untrusted(path, limit=MAX_LOCK_BYTES, what="lock file", hint=hint)
    except FileNotFoundError:
        raise InputNotFoundError(
            "the lock file the manifest names is not here",
            path=shown,
            field="environment.lock.path",
            hint=hint,
        ) from None
    observed = "sha256:" + hashlib.sha256(raw).hexdigest()
    if ref.digest and observed != ref.digest:
        raise RefusedError(
            "the lock file is not the one the manifest pins",
            path=shown,
            field="environment.lock.digest",
            expected=ref.digest,
            observed=observed,
            hint=hint,
        )
    return raw.decode("utf-8", "replace")


def _data_kinds(manifest_path: Path, entries: Any) -> dict[str, str]:
    kinds = {}
    for entry in entries:
        where = manifest_path.parent / entry.path
        kinds[entry.name] = "file" if where.is_file() else "tree" if where.is_dir() else "absent"
    return kinds


def export_manifest(manifest: str | Path, *, fmt: str, audit: str | Path | None = None) -> Exported:
    """The manifest at ``manifest`` as ``fmt`` (one of ``FORMATS``), with an audit's
    results when ``audit`` (the JSON ``ftmanifest audit`` wrote) is given."""
    if fmt not in FORMATS:
        raise InputError(
            f"unknown export format {fmt!r}",
            field="--format",
            expected=", ".join(FORMATS),
            observed=fmt,
            hint="ftmanifest export M --format cyclonedx",
        )
    path = Path(manifest)
    loaded = load_manifest(path)
    problems = [f for f in lint_document(loaded.document) if f.severity == "error"]
    if problems:
        first = problems[0]
        raise RefusedError(
            f"the manifest does not pass lint ({len(problems)} problem(s)): "
            "a bill of materials of unpinned things names nothing",
            path=str(path),
            field=first.field,
            expected=first.expected,
            observed=first.observed,
            hint=f"ftmanifest lint {path} shows every problem and its fix",
            findings=problems,
        )
    m, digest = loaded.manifest, loaded.digest()
    lock = m.environment.lock
    locked = parse_lock(_lock_text(path, lock)) if lock is not None else []
    report, audit_digest = None, None
    if audit is not None:
        report = load_report_data(audit)
        seen = (report.get("manifest") or {}).get("digest")
        if seen != digest:
            raise RefusedError(
                "the audit is of another manifest",
                path=str(audit),
                field="manifest.digest",
                expected=digest,
                observed=str(seen),
                hint=f"audit the run with --manifest {path} and export with that audit",
            )
        audit_digest = "sha256:" + hashlib.sha256(bom_json(report).encode()).hexdigest()
    bom = build_bom(
        m,
        digest,
        locked=locked,
        data_kinds=_data_kinds(path, m.data),
        report=report,
        audit_digest=audit_digest,
    )
    secrets_in(bom)  # a secret refuses the export; personal data is masked
    clean, redacted = redact_values(bom)
    return Exported(bom_json(clean), redacted)
