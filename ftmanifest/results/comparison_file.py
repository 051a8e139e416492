"""The comparison record ``compare --out`` writes and ``audit`` re-judges.

Layer: judging rooms - edge (reads and writes files).  A comparison is only as good as
the results it was made from, so the record names both results files with their digests
and the manifest's digest; ``audit`` re-reads the results, checks the digests and runs
the comparison again instead of trusting a verdict in a file:

    {"format": "ftmanifest-comparison", "version": 1,
     "manifest": {"digest"}, "baseline": {"path", "digest"},
     "candidate": {"path", "digest"}, "comparison": Comparison.to_dict()}

Paths are written relative to the record's folder when they are inside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.hashing.files import hash_file
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.results.compare import compare
from ftmanifest.results.resultsfile import load_results, score_split
from ftmanifest.untrusted import read_untrusted

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.model import Manifest

FORMAT = "ftmanifest-comparison"
VERSION = 1
MAX_BYTES = 64 << 20
_LOC = ("experiment", "guards")


def record(
    manifest_digest: str, baseline: Path, candidate: Path, comparison: Any, out: Path
) -> str:
    """The record's JSON text for ``out``."""

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
    manifest: Manifest,
    manifest_digest: str,
    path: Path,
    deliverable_digest: str | None = None,
    loaded: LoadedManifest | None = None,
) -> tuple[list[Finding], Any]:
    """Audit rows for the comparison record at ``path`` and the comparison made
    again from the results it names (None when it could not be made).
    ``deliverable_digest``: the tree digest of the adapter being handed off, which
    the candidate must have been scored with.  ``loaded`` (the ``LoadedManifest``):
    both results files are scored again from their predictions on the pinned split
    and must say what they say (``rescore``)."""
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
    rows += _not_pinned(manifest, refs["baseline"], files["baseline"], path)
    if loaded is not None:
        pinned = manifest.evaluation.baseline.results
        if pinned is not None and refs["baseline"].get("digest") == pinned.digest:
            files = {**files, "baseline": loaded.path.parent / pinned.path}  # its predictions
        for side, file in files.items():
            rows += rescore(loaded, side, file, results[side])
    comparison = compare(manifest, results["baseline"], results["candidate"])
    rows += [f._replace(path=str(path)) for f in comparison.findings if f.severity == "error"]
    if comparison.comparable:
        rows += unjudged(comparison, path, len(manifest.experiment.guards))
    if not comparison.passed and not any(f.severity == "error" for f in comparison.findings):
        rows.append(_row("comparison-failed", "the comparison refused the candidate", path,
                         "see `ftmanifest compare`'s rows"))  # fmt: skip
    return rows, comparison


def _not_pinned(manifest: Manifest, ref: dict[str, Any], file: Path, path: Path) -> list[Finding]:
    """The comparison's baseline must be ``evaluation.baseline.results`` (by digest):
    any other baseline scored under the manifest would let a weaker one in."""
    pinned = manifest.evaluation.baseline.results
    if pinned is None or pinned.digest is None or ref.get("digest") == pinned.digest:
        return []
    return [Finding.at(("evaluation", "baseline", "results"), kind="audit",
                       rule="audit.comparison-baseline-not-pinned",
                       message="the comparison's baseline is not the baseline results the "
                       "manifest pins", path=str(file), expected=pinned.digest,
                       observed=str(ref.get("digest")),
                       hint=f"compare against the pinned baseline: ftmanifest compare M "
                       f"--baseline {pinned.path} --candidate C --out {path}")]  # fmt: skip


NOT_JUDGED = ("not-evaluated", "not-established")


def unjudged(comparison: Any, path: Path, guards: int | None = None) -> list[Finding]:
    """One error row per guard the comparison did not judge: measured on another
    split (not-evaluated), a pass the data cannot establish, or no verdict at all
    (``guards``: how many the manifest has).  A warning to ``compare`` is a refusal
    to audit: handoff needs every guard to hold."""
    rows: list[Finding] = []
    for g in comparison.guards:
        if g.verdict not in NOT_JUDGED:
            continue
        here = ("experiment", "guards", g.guard)
        why = [
            f for f in comparison.findings if f.rule == f"guard.{g.verdict}" and f.loc[:3] == here
        ]
        first = why[0] if why else None
        what = f"guard {g.guard} ({g.kind} {g.metric})"
        if g.verdict == "not-evaluated":
            split = first.expected if first is not None else g.expected
            rows.append(_guard_row(g.guard, "split", f"{what} was not evaluated: it is measured "
                                   f"on {split!r}, the comparison is on "
                                   f"{first.observed if first else g.observed!r}", path,
                                   f"score baseline and candidate with --split {split}, then "
                                   "compare again", first, g))  # fmt: skip
        else:
            cats = [str(f.extra.get("category")) for f in why if f.extra.get("category")]
            on = f" for {', '.join(cats)}" if cats else ""
            rows.append(_guard_row(g.guard, "max_drop", f"{what} passes but is not established"
                                   f"{on}: the 95% interval of the change crosses the allowed "
                                   "drop", path, "evaluate on more examples (a larger eval "
                                   "split) to establish the pass, then compare again", first,
                                   g))  # fmt: skip
    seen = {g.guard for g in comparison.guards}
    for n in range(guards or 0):
        if n not in seen:
            rows.append(Finding.at(("experiment", "guards", n), kind="audit",
                                   rule="audit.guard-not-judged", path=str(path),
                                   message=f"guard {n} has no verdict in the comparison",
                                   expected="pass", observed="no verdict",
                                   hint="give the guard a minimum or a max_drop, then compare "
                                   "again"))  # fmt: skip
    return rows


def _guard_row(
    n: int, field: str, message: str, path: Path, hint: str, why: Finding | None, g: Any
) -> Finding:
    return Finding.at(("experiment", "guards", n, field), kind="audit",
                      rule="audit.guard-not-judged", message=message, path=str(path),
                      expected=why.expected if why is not None else g.expected,
                      observed=why.observed if why is not None else g.observed,
                      hint=hint)  # fmt: skip


def no_guards(manifest: Manifest, manifest_path: Path) -> list[Finding]:
    """A manifest without guards lets any candidate pass (lint's FTM071); audit
    refuses to hand one off."""
    if manifest.experiment.guards:
        return []
    task = manifest.experiment.task
    kinds = "format_validity or required_fields" if task == "extraction" else "per_category"
    return [Finding.at(_LOC, kind="audit", rule="audit.no-guards",
                       message="the manifest has no guards: no candidate can be refused",
                       path=str(manifest_path), expected="at least one guard",
                       observed="guards: []",
                       hint=f"add a {kinds} guard to experiment.guards, lock and sign the "
                       "manifest, then compare again")]  # fmt: skip


def _results_row(rule: str, message: str, file: Path, hint: str, where: str, **kw: Any) -> Finding:
    return Finding.at(_LOC, kind="audit", rule=f"audit.{rule}", message=message, path=str(file),
                      hint=hint, extra={"results_field": where}, **kw)  # fmt: skip


def rescore(
    loaded: LoadedManifest, side: str, file: Path, results: dict[str, Any]
) -> list[Finding]:
    """Score ``results``' predictions again on its pinned split; a row when they are
    not there (a results file from before the path was recorded relative to it),
    changed, refused by the split, or score to other metrics than the file's."""
    ref, split = results["predictions"], results["split"]["name"]
    preds = file.parent / str(ref["path"])
    fix = (f"score the {side}'s predictions again: ftmanifest score --manifest M --split "
           f"{split} --predictions P --out {file} (which records where P is), then compare "
           "again")  # fmt: skip
    if not preds.is_file():
        return [_results_row("results-predictions-missing", f"the {side}'s predictions are not "
                             "where its results file says", file, fix, "predictions.path",
                             expected="the predictions file, relative to the results file",
                             observed=f"{ref['path']} (not found)")]  # fmt: skip
    have = hash_file(preds, use_cache=False).digest
    if have != ref["digest"]:
        return [_results_row("results-predictions-changed", f"the {side}'s predictions changed "
                             "after they were scored", preds, fix, "predictions.digest",
                             expected=str(ref["digest"]), observed=have)]  # fmt: skip
    try:
        _, metrics, examples = score_split(loaded, split, preds)
    except FtManifestError as exc:
        at = Path(exc.path or preds)
        return [_results_row("results-rescore-refused", f"the {side}'s predictions do not score "
                             f"on the pinned split {split!r}: {exc.message}", at, exc.hint or fix,
                             f"predictions ({exc.field or 'file'})",
                             expected=exc.expected, observed=exc.observed)]  # fmt: skip
    again = json.loads(json.dumps({"metrics": metrics, "examples": examples}))
    diff = _first_difference(
        again, {"metrics": results["metrics"], "examples": results["examples"]}
    )
    if diff is None:
        return []
    where, want, got = diff
    return [_results_row("results-rescored-differ", f"the {side}'s results file says {where} is "
                         f"{got}; its predictions score {want}", file, fix, where,
                         expected=want, observed=got)]  # fmt: skip


def _first_difference(want: Any, got: Any, where: str = "") -> tuple[str, str, str] | None:
    """(dotted path, wanted, found) of the first place ``got`` differs from ``want``."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            if key not in want or key not in got:
                shown = json.dumps(want.get(key, "absent"))
                return f"{where}.{key}".lstrip("."), shown, json.dumps(got.get(key, "absent"))
            found = _first_difference(want[key], got[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    if want == got and type(want) is type(got):
        return None
    return where.lstrip(".") or "(document)", _short(json.dumps(want)), _short(json.dumps(got))


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."
