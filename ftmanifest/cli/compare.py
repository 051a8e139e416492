"""``ftmanifest compare M --baseline B --candidate C``: every guard, judged.

Layer: commands - edge.  Loads the manifest and both results files (``ftmanifest
score``), runs ``ftmanifest.results.compare.compare`` and prints the guards'
verdicts, the per-category deltas with their bootstrap intervals and the
examples that changed verdict.  Exit 1 when any guard refuses or the runs are
not comparable, 2 when an input is unusable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.errors import UsageError
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.manifest import load_manifest
from ftmanifest.output import table, to_json
from ftmanifest.results.compare import compare
from ftmanifest.results.comparison_file import record
from ftmanifest.results.resultsfile import load_results

if TYPE_CHECKING:
    from ftmanifest.results.compare import Comparison


DESCRIPTION = """\
Judge a candidate's results against a baseline's (both from `ftmanifest
score`) under every guard of the manifest: the guards' verdicts, the
per-category deltas with their paired bootstrap intervals, and the examples
that changed verdict.  --out writes the comparison record that
`ftmanifest audit` re-judges.  Exit 0 every guard passes, 1 a guard refuses
or the runs are not comparable, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest compare exp.yaml --baseline base.results.json --candidate cand.results.json
  ftmanifest compare exp.yaml --baseline base.json --candidate cand.json --out out/comparison.json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check a candidate's results against the manifest's guards",
    )
    add_manifest_argument(p, kind=str)
    p.add_argument(
        "--baseline",
        required=True,
        metavar="B",
        help="the baseline to compare against: the baseline run's results file",
    )
    p.add_argument("--candidate", required=True, metavar="C", help="the candidate's results file")
    p.add_argument(
        "--resamples", type=int, default=1000, help="paired bootstrap resamples (0: no intervals)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="FILE",
        help="also write the comparison record (the results' digests and the verdicts) "
        "that `ftmanifest audit` re-judges, e.g. RUN_DIR/comparison.json",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.resamples < 0:
        raise UsageError(
            "--resamples is negative",
            field="--resamples",
            expected=">= 0",
            observed=str(args.resamples),
            hint="pass 0 to skip the intervals",
        )
    loaded = load_manifest(args.manifest)
    baseline = load_results(args.baseline)
    candidate = load_results(args.candidate)
    result = compare(loaded.manifest, baseline, candidate, resamples=args.resamples, seed=args.seed)
    result.findings = [f._replace(path=str(loaded.path)) for f in result.findings]
    if args.out is not None:
        text = record(loaded.digest(), Path(args.baseline), Path(args.candidate), result, args.out)
        atomic_write_text(args.out, text)
    if args.format == "json":
        sys.stdout.write(to_json(result.to_dict()))
    else:
        sys.stdout.write(render_text(result))
    return 0 if result.passed else 1


def _num(x: float) -> str:
    return f"{x:+.4f}"


def render_text(result: Comparison) -> str:

    parts = []
    if result.guards:
        rows = [
            (f"guards[{g.guard}]", g.kind, g.metric, g.verdict, g.expected, g.observed)
            for g in result.guards
        ]
        parts.append(table(rows, ("guard", "kind", "metric", "verdict", "expected", "observed")))
    if result.categories:
        rows2 = [
            (
                c.category,
                c.metric,
                f"{c.baseline:.4f}",
                f"{c.candidate:.4f}",
                _num(c.delta),
                f"[{_num(c.interval[0])}, {_num(c.interval[1])}]" if c.interval else "-",
                c.verdict,
            )
            for c in result.categories
        ]
        header = ("category", "metric", "baseline", "candidate", "delta", "95% CI", "verdict")
        parts.append(table(rows2, header))
    if result.changed:
        lines = ["examples that changed verdict:"]
        for cat, row in result.changed.items():
            lines.append(
                f"  {cat}: improved {_ids(row['improved'])}; regressed {_ids(row['regressed'])}"
            )
        parts.append("\n".join(lines) + "\n")
    elif result.comparable:
        parts.append("no example changed verdict\n")
    if result.findings:
        # one row per finding, by manifest field: these findings are about guards, not
        # file positions, so ``findings_table``'s path column would say nothing
        rows3 = [(f.field or "-", f.rule, f.severity) for f in result.findings]
        notes = [[("problem", f.message), ("fix", f.hint)] for f in result.findings]
        parts.append(table(rows3, ("field", "rule", "severity"), notes=notes, nowrap=(0, 1, 2)))
    warnings = sum(1 for f in result.findings if f.severity == "warning")
    verdict = "refused" if not result.passed else "passed: every guard holds"
    if result.passed and warnings:
        verdict += f", {warnings} warning(s) to read"
    parts.append(verdict + "\n")
    return "\n".join(parts)


SHOWN_IDS = 20  # per list in text; --format json lists every id


def _ids(ids: list[str | int]) -> str:
    if not ids:
        return "none"
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return ", ".join(str(i) for i in ids[:SHOWN_IDS]) + more
