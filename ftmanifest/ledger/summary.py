"""One experiment as the ledger tells it, for ``verify``, ``audit`` and the report.

Layer: judging rooms - pure core (entries and the manifest in, a summary and warnings
out); ``for_manifest`` is the one edge helper that reads the ledger folder.  The summary
holds the experiment's attempts counted by outcome (abandoned and invalid ones
included), every attempt that spent more than ``experiment.budget``, and, per sealed
split, how many times the experiment's family used it.  A second use of a sealed split,
a budget overrun and an unreadable or tampered ledger are warnings: they happened
already, so they are flagged where a reviewer reads, not hidden.  In a ledger that
signs, the summary and the preflight check read only records signed by a trusted key
(``evidence``); each other record is a warning naming it and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.ledger import Ledger, ledger_dir
from ftmanifest.ledger.attempts import Attempt, attempts, counts, family_uses, over_budget
from ftmanifest.ledger.evidence import Untrusted, evidence, reading_trust, signs, untrusted_warning
from ftmanifest.ledger.recordfile import Entry, Problem
from ftmanifest.manifest.identity import recipe_digest

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest

SHOWN_UNTRUSTED = 5  # untrusted records named one by one among verify's warnings


def budget_of(attempt: Attempt, fallback: dict[str, Any]) -> dict[str, Any]:
    """The budget the attempt ran under: from the manifest body it recorded."""
    for e in reversed(attempt.entries):
        m = e.record.get("manifest")
        body = m.get("body") if isinstance(m, dict) else None
        if isinstance(body, dict):
            exp = body.get("experiment")
            budget = exp.get("budget") if isinstance(exp, dict) else None
            return budget if isinstance(budget, dict) else {}
    return fallback


def summarize(
    entries: Sequence[Entry],
    problems: Sequence[Problem],
    *,
    experiment: str,
    parent: str | None,
    budget: dict[str, Any],
    sealed: Sequence[str],
    ledger: str,
    untrusted: Sequence[Untrusted] = (),
) -> dict[str, Any]:
    mine = [a for a in attempts(entries) if a.experiment == experiment]
    over = []
    for a in mine:
        flags = over_budget(a, budget_of(a, budget))
        if flags:
            over.append({"attempt": a.id, "status": a.status, "over": flags})
    uses = {}
    for split in sealed:
        found = family_uses(entries, experiment, split, {experiment: parent})
        uses[split] = {
            "family_uses": len(found),
            "this_experiment": sum(1 for u in found if u.experiment == experiment),
            "uses": [
                {
                    "use": u.use,
                    "experiment": u.experiment,
                    "at": u.at,
                    "reason": u.reason,
                    "scored": u.scored_by is not None,
                }  # fmt: skip
                for u in found
            ],
        }
    return {
        "ledger": ledger,
        "records": len(entries) + len(untrusted),
        "findings": [p.finding().to_dict() for p in problems],
        # the same as one line each, as before "findings"; kept for a release
        "problems": [p.rule + ": " + p.message + f" ({p.file})" for p in problems],
        "untrusted": [u.to_dict() for u in untrusted],
        "attempts": len(mine),
        "by_status": counts(mine),
        "over_budget": over,
        "sealed": uses,
    }


def warnings_of(summary: dict[str, Any]) -> list[str]:
    out = []
    if summary["problems"]:
        out.append(
            f"ledger {summary['ledger']}: {len(summary['problems'])} problem(s) "
            "(`ftmanifest ledger check`): " + summary["problems"][0]
        )
    shown = [untrusted_warning(row) for row in summary.get("untrusted", [])]
    out += shown[:SHOWN_UNTRUSTED]
    if len(shown) > SHOWN_UNTRUSTED:
        out.append(
            f"{len(shown) - SHOWN_UNTRUSTED} more untrusted record(s) in {summary['ledger']} "
            "(`ftmanifest ledger list --format json` names them)"
        )
    for row in summary["over_budget"]:
        out.append(
            f"attempt {row['attempt']} ({row['status']}) went over experiment.budget: "
            + "; ".join(row["over"])
        )
    for split, use in summary["sealed"].items():
        if use["family_uses"] >= 2:
            out.append(
                f"sealed split {split!r} used {use['family_uses']} times by this experiment's "
                "family: choosing settings on it again and again destroys its value"
            )
    return out


def for_manifest(
    loaded: LoadedManifest,
    manifest_path: Path,
    ledger: Path | str | None = None,
    trust_path: Path | None = None,
) -> tuple[dict[str, Any] | None, list[Entry]]:
    """The summary of ``loaded``'s experiment and the ledger's entries that
    are evidence, read once; (None, []) when there is no ledger yet."""
    folder = ledger_dir(manifest_path, ledger)
    store = Ledger(folder)
    if not store.exists():
        return None, []
    contents, problems = store.check()
    trust = reading_trust(folder, manifest_path, trust_path) if signs(contents.entries) else None
    found = evidence(contents.entries, trust)
    exp = loaded.manifest.experiment
    summary = summarize(
        found.entries,
        problems,
        experiment=exp.id,
        parent=exp.parent,
        budget=exp.budget.model_dump(mode="json"),
        sealed=[d.name for d in loaded.manifest.data if d.sealed],
        ledger=str(folder),
        untrusted=found.untrusted,
    )
    return summary, found.entries


def preflight_warning(
    entries: Sequence[Entry], loaded: LoadedManifest, environment: Any
) -> tuple[str, str | None]:
    """("ok" | "missing" | "stale", the warning) from the newest passing preflight
    record of this experiment against the manifest's recipe and this platform.

    The method: a platform change (another backend kind, device or driver)
    means redoing the start and quality checks; so does a changed recipe.
    """
    exp = loaded.manifest.experiment.id
    passing = [
        e for e in entries
        if e.record.get("status") == "preflight" and e.record.get("ok") is True
        and isinstance(e.record.get("experiment"), dict) and e.record["experiment"].get("id") == exp
    ]  # fmt: skip
    fix = f"run `ftmanifest preflight {loaded.path}` on this machine"
    if not passing:
        return "missing", f"preflight missing: no passing preflight of {exp!r} recorded; {fix}"
    last = passing[-1].record
    if last.get("recipe_digest") != recipe_digest(loaded):
        return "stale", (
            f"preflight stale: the recipe changed since the passing preflight of "
            f"{last.get('at', '?')[:19]}; {fix}"
        )
    then = (last.get("environment") or {}).get("platform") or {}
    backend = environment.backend if environment is not None else None
    now = {} if backend is None else {
        "kind": backend.kind, "driver": backend.driver, "runtime": backend.runtime,
        "devices": [d.name for d in backend.devices],
    }  # fmt: skip
    changed = [k for k in ("kind", "driver", "runtime", "devices") if then.get(k) != now.get(k)]
    if changed:
        return "stale", (
            f"preflight stale: the platform changed ({', '.join(changed)}) since the passing "
            f"preflight of {last.get('at', '?')[:19]}: redo the start and quality checks; {fix}"
        )
    return "ok", None
