"""``ftmanifest lint M...``: static pinning rules, compiler-style output.

Layer: edge.  Exit 0 clean, 1 problems found, 2 a file unusable (unreadable,
malformed, schema-invalid).  Imports neither pydantic nor torch.
"""

from __future__ import annotations

import argparse
import sys

from ftmanifest.errors import EXIT_INPUT, EXIT_OK, EXIT_REFUSED


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from ftmanifest.cli import add_format_argument

    p = sub.add_parser("lint", help="check manifests are fully pinned (no I/O beyond reading)")
    p.add_argument("manifests", nargs="+", metavar="MANIFEST")
    add_format_argument(p, sarif=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftmanifest.errors import FtManifestError, ManifestInvalidError
    from ftmanifest.findings import Finding
    from ftmanifest.lint import lint_document
    from ftmanifest.manifest import load_document
    from ftmanifest.output import render_findings

    findings: list[Finding] = []
    unusable = 0
    for path in args.manifests:
        try:
            findings.extend(lint_document(load_document(path)))
        except ManifestInvalidError as exc:
            unusable += 1
            findings.extend(exc.problems)
        except FtManifestError as exc:
            unusable += 1
            findings.append(
                Finding(
                    kind="input",
                    rule="FTM000",
                    message=exc.message,
                    path=exc.path or path,
                    line=exc.line,
                    column=exc.column,
                    field=exc.field,
                    expected=exc.expected,
                    observed=exc.observed,
                    hint=exc.hint,
                )
            )
    files = len(args.manifests)
    sys.stdout.write(render_findings(findings, args.format, files=files, unusable=unusable))
    if args.format == "text":
        bad = len({f.path for f in findings})
        summary = (
            f"{len(findings)} problem(s) in {bad} of {files} manifest(s)"
            if findings
            else f"{files} manifest(s) pinned, no problems"
        )
        sys.stderr.write(summary + "\n")
    if unusable:
        return EXIT_INPUT
    return EXIT_REFUSED if findings else EXIT_OK
