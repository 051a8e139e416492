"""The comparison record ``compare --out`` writes and ``audit`` re-judges.

Layer: edge (reads and writes files).  A comparison is only as good as the
results it was made from, so the record names both results files with their
digests and the manifest's digest; ``audit`` re-reads the results, checks the
digests and runs the comparison again instead of trusting a verdict in a file:

    {"format": "ftmanifest-comparison", "version": 1,
     "manifest": {"digest"}, "baseline": {"path", "digest"},
     "candidate": {"path", "digest"}, "comparison": Comparison.to_dict()}

Paths are written relative to the record's folder when they are inside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding

FORMAT = "ftmanifest-comparison"
VERSION = 1
MAX_BYTES = 64 << 20
_LOC = ("experiment", "guards")


def record(
    manifest_digest: str, baseline: Path, candidate: Path, comparison: Any, out: Path
) -> str:
    """The record's JSON text for ``out``."""
    from ftmanifest.hashing import hash_file

    def ref(p: Path) -> dict[str, str]:
        rel = os.path.relpath(p.resolve(), out.resolve().parent)
        shown = rel if not rel.startswith("..") else str(p.resolve())
        return {"path": shown, "digest": hash_file(p, use_cache=False).digest}

    body = {
        "format": FORMAT,
        "version": VERSION,
        "manifest": {"digest": manifest_digest},
        "baseline": ref(baseline),
        "candidate": ref(candidate),
        "comparison": comparison.to_dict(),
    }
    return json.dumps(body, indent=2) + "\n"


def _row(rule: str, message: str, path: Path, hint: str, **kw: Any) -> Finding:
    return Finding.at(_LOC, kind="audit", rule=f"audit.{rule}", message=message,
                      path=str(path), hint=hint, **kw)  # fmt: skip


def rejudge(
    manifest: Any, manifest_digest: str, path: Path, deliverable_digest: str | None = None
) -> tuple[list[Finding], Any]:
    """Audit rows for the comparison record at ``path`` and the comparison made
    again from the results it names (None when it could not be made).
    ``deliverable_digest``: the tree digest of the adapter being handed off, which
    the candidate must have been scored with."""
    from ftmanifest.errors import FtManifestError
    from ftmanifest.hashing import hash_file
    from ftmanifest.manifest.jsonkeys import unique_keys
    from ftmanifest.results.compare import compare
    from ftmanifest.results.resultsfile import load_results
    from ftmanifest.untrusted import read_untrusted

    rerun = "rerun: ftmanifest compare M --baseline B --candidate C --out " + str(path)
    try:
        raw = read_untrusted(path, limit=MAX_BYTES, what="comparison", hint=rerun)
        body = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys(ValueError))
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError(f"not an {FORMAT} record")
        refs = {side: body[side] for side in ("baseline", "candidate")}
        files = {side: path.parent / str(ref["path"]) for side, ref in refs.items()}
    except (OSError, ValueError, KeyError, TypeError, FtManifestError) as exc:
        why = exc.message if isinstance(exc, FtManifestError) else str(exc)
        return [_row("comparison-unreadable", f"the comparison cannot be read: {why}", path,
                     rerun)], None  # fmt: skip
    rows: list[Finding] = []
    results = {}
    for side, file in files.items():
        try:
            have = hash_file(file, use_cache=False).digest
            if have != refs[side].get("digest"):
                rows.append(_row("comparison-stale", f"the {side} results changed after the "
                                 "comparison", file, rerun, expected=str(refs[side].get("digest")),
                                 observed=have))  # fmt: skip
                continue
            results[side] = load_results(file)
        except FtManifestError as exc:
            rows.append(_row("comparison-unreadable", f"the {side} results: {exc.message}", file,
                             rerun, observed=exc.observed))  # fmt: skip
    if rows:
        return rows, None
    made_for = results["candidate"].get("manifest", {}).get("digest")
    if made_for != manifest_digest:
        rows.append(_row("comparison-other-manifest", "the candidate was scored under another "
                         "manifest", files["candidate"], "score the predictions under this "
                         "manifest, then compare again", expected=manifest_digest,
                         observed=str(made_for)))  # fmt: skip
    scored_with = (results["candidate"].get("adapter") or {}).get("tree_digest")
    if deliverable_digest is not None and scored_with != deliverable_digest:
        rows.append(_row("comparison-not-of-deliverable", "the candidate was scored with "
                         "another adapter than the one handed off", files["candidate"],
                         "score the deliverable's predictions (score --adapter DIR), then "
                         "compare again",
                         expected=deliverable_digest,
                         observed=scored_with or "no adapter recorded"))  # fmt: skip
    split = results["candidate"].get("split", {}).get("name")
    roles = {e.name: e.role for e in manifest.data}
    role = roles.get(split, "not in the manifest")
    if role not in ("eval", "test"):
        rows.append(_row("comparison-split", f"the comparison is on split {split!r}, not an "
                         "eval or test split", files["candidate"], "score an eval or the sealed "
                         "test split", expected="a data entry with role eval or test",
                         observed=f"{split} ({role})"))  # fmt: skip
    comparison = compare(manifest, results["baseline"], results["candidate"])
    rows += [f._replace(path=str(path)) for f in comparison.findings if f.severity == "error"]
    if not comparison.passed and not any(f.severity == "error" for f in comparison.findings):
        rows.append(_row("comparison-failed", "the comparison refused the candidate", path,
                         "see `ftmanifest compare`'s rows"))  # fmt: skip
    return rows, comparison
