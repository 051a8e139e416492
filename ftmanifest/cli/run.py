"""``ftmanifest run M -- CMD...``: verify, then run the training command.

Layer: edge.  On drift nothing runs (exit 1).  Otherwise CMD runs with
FTMANIFEST_MANIFEST and FTMANIFEST_DIGEST in its environment (so training code
and the Trainer guard know which manifest they run under) and its exit code is
returned.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ftmanifest.errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ftmanifest.cli import verify

    p = sub.add_parser(
        "run",
        help="verify a manifest, then run the training command",
        usage="ftmanifest run [options] MANIFEST -- CMD [ARG ...]",
    )
    verify.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftmanifest.cli import verify

    command = args.passthrough
    if not command:
        raise UsageError(
            "no command to run",
            field="CMD",
            expected="-- CMD ...",
            observed="nothing",
            hint="ftmanifest run M -- python train.py",
        )
    report, code = verify.report_and_print(args)
    if not report.ok:
        sys.stderr.write("ftmanifest: not running the command: the manifest does not match\n")
        return code
    env = {
        **os.environ,
        "FTMANIFEST_MANIFEST": str(args.manifest.resolve()),
        "FTMANIFEST_DIGEST": report.manifest_digest,
    }
    sys.stdout.flush()
    return subprocess.call(command, env=env)
