"""pre-commit entry points (see .pre-commit-hooks.yaml and hooks/).

Layer: edge.  The hook lints the files pre-commit passes without building the
argparse parser (every millisecond of a commit hook is felt); errors are
rendered by the same handler as the CLI's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = "usage: ftmanifest-lint [--format text|json|sarif] MANIFEST..."


def lint_main(argv: Sequence[str]) -> int:
    from ftmanifest.errors import EXIT_INPUT

    fmt, files = "text", []
    items = list(argv)
    while items:
        arg = items.pop(0)
        if arg.startswith("--format"):
            value = arg.partition("=")[2] or (items.pop(0) if items else "")
            if value not in ("text", "json", "sarif"):
                sys.stderr.write(f"{USAGE}\nftmanifest-lint: bad --format {value!r}\n")
                return EXIT_INPUT
            fmt = value
        elif arg in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n")
            return 0
        elif arg.startswith("-") and arg != "-":
            sys.stderr.write(f"{USAGE}\nftmanifest-lint: unknown option {arg}\n")
            return EXIT_INPUT
        else:
            files.append(arg)
    if not files:
        return 0  # pre-commit found no manifest among the staged files
    from ftmanifest import lint_paths
    from ftmanifest.lint_report import lint_report

    findings, unusable = lint_paths(files)
    return lint_report(findings, unusable, len(files), fmt)
