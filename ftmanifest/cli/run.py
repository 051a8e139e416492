"""``ftmanifest run M -- CMD...``: verify, then run the training command.

Layer: edge.  On drift nothing runs (exit 1).  Otherwise CMD runs with
FTMANIFEST_MANIFEST and FTMANIFEST_DIGEST in its environment (so training code
and the Trainer guard know which manifest they run under), supervised by
``ftmanifest.supervise``: SIGTERM, SIGINT and SIGHUP are passed on to its
process group, which gets ``--grace`` seconds (default $FTMANIFEST_GRACE, else
30) to end before SIGKILL, and nothing of it outlives ``run``.

Exit codes: the command's own, or 128+N when signal N ended it; 126 CMD cannot
be executed, 127 CMD not found (as a shell); before CMD starts, 1 drift and 2
unusable input or usage, or N for both with ``--refused-exit N``, so a caller
can tell a refusal from the command's own codes.  Argument parsing errors stay
2: they happen before any option is read.

Every run appends to the manifest's run records (``<manifest>.runs.jsonl``):
``refused`` (nothing ran), ``started`` (with the drifts accepted on purpose;
if that record cannot be written, nothing runs), then ``finished``/``failed``
with the exit status, or ``not-started`` when CMD could not be executed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport

GRACE_ENV = "FTMANIFEST_GRACE"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ftmanifest.cli import verify

    p = sub.add_parser(
        "run",
        help="verify a manifest, then run the training command",
        usage="ftmanifest run [options] MANIFEST -- CMD [ARG ...]",
    )
    verify.add_arguments(p)
    p.add_argument(
        "--grace",
        type=_seconds,
        metavar="SECONDS",
        help="after passing SIGTERM/SIGINT/SIGHUP on to CMD, wait this long before "
        f"SIGKILL (default: ${GRACE_ENV}, else 30)",
    )
    p.add_argument(
        "--refused-exit",
        type=_refused_code,
        metavar="N",
        help="exit N (1-125) instead of 1 or 2 when CMD is not started because of "
        "drift or unusable input, to tell that from CMD's own exit codes",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftmanifest import runrecord
    from ftmanifest.cli import verify
    from ftmanifest.supervise import supervise

    try:
        command = args.passthrough
        if not command:
            raise UsageError(
                "no command to run",
                field="CMD",
                expected="-- CMD ...",
                observed="nothing",
                hint="ftmanifest run M -- python train.py",
            )
        grace = _grace(args.grace)
        report, code = verify.report_and_print(args)
    except FtManifestError as exc:
        if args.refused_exit is not None:
            exc.exit_code = args.refused_exit  # this one refusal, not its whole class
        raise
    if not report.ok:
        _record(report, "refused", command)
        sys.stderr.write("ftmanifest: not running the command: the manifest does not match\n")
        return code if args.refused_exit is None else int(args.refused_exit)
    env = {
        **os.environ,
        "FTMANIFEST_MANIFEST": str(args.manifest.resolve()),
        "FTMANIFEST_DIGEST": report.manifest_digest,
    }
    started = runrecord.now()
    if report.accepted:
        try:  # an acceptance that cannot be recorded is not made: nothing runs
            verify.record_acceptances(report, "started", command=command)
        except FtManifestError as exc:
            if args.refused_exit is not None:
                exc.exit_code = args.refused_exit
            raise
    else:
        _record(report, "started", command)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        status = supervise(command, env, grace=grace)
    except FtManifestError as exc:
        _record(report, "not-started", command, started_at=started, error=exc.message)
        raise
    outcome = "finished" if status == 0 else "failed"
    _record(report, outcome, command, started_at=started, exit_code=status)
    return status


def _record(report: VerifyReport, status: str, command: list[str], **extra: Any) -> None:
    """Append a run record; a run is not stopped because its record could not be written."""
    from ftmanifest import runrecord

    try:
        runrecord.append(
            report.manifest_path,
            runrecord.build(
                report,
                status=status,
                command=command,
                **({"finished_at": runrecord.now()} if status != "started" else {}),
                **extra,
            ),
        )
    except OSError as exc:
        path = runrecord.records_path(report.manifest_path)
        why = escape(str(exc.strerror or exc))
        sys.stderr.write(f"warning: run record not written to {escape(str(path))}: {why}\n")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value < math.inf):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _refused_code(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 125:
        raise argparse.ArgumentTypeError(
            f"expected 1-125 (126 and up mean: cannot run, not found, killed), got {text!r}"
        )
    return int(text)


def _grace(option: float | None) -> float:
    from ftmanifest.supervise import DEFAULT_GRACE

    if option is not None:
        return option
    text = os.environ.get(GRACE_ENV, "").strip()
    if not text:
        return DEFAULT_GRACE
    try:
        return _seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(
            f"{GRACE_ENV} is not a number of seconds",
            field=GRACE_ENV,
            expected="seconds >= 0",
            observed=text,
            hint=f"unset {GRACE_ENV} or pass --grace SECONDS",
        ) from exc
