"""pre-commit entry points (see .pre-commit-hooks.yaml and hooks/).

Layer: edges - edge.  pre-commit passes every staged YAML, JSON and TOML file; the hook
lints those that are manifests (``manifest.recognise``: the top-level
``ftmanifest:`` key, a ``*.ftm.*`` name, a broken file in ``manifests/``) and
passes over the rest (``.pre-commit-config.yaml``, CI workflows, a model's
``config.json``) without a word.  It builds no argparse parser (every
millisecond of a commit hook is felt); findings are rendered as the CLI's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ftmanifest import lint_paths
from ftmanifest.errors import EXIT_INPUT
from ftmanifest.lint_report import lint_report
from ftmanifest.manifest.recognise import manifests_among

USAGE = (
    "usage: ftmanifest-lint [--format text|json|sarif] FILE...\n"
    "lints the FILEs that are ftmanifest manifests; other files are passed over"
)


def lint_main(argv: Sequence[str]) -> int:
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

    manifests = manifests_among(files)
    if not manifests:
        return 0  # no manifest among the staged files

    findings, unusable = lint_paths(manifests)
    return lint_report(findings, unusable, len(manifests), fmt)
