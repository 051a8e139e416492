"""``ftmanifest run M -- CMD...``: verify, then run the training command.

Layer: commands - edge.  On drift nothing runs (exit 1).  Otherwise CMD runs with
FTMANIFEST_MANIFEST and FTMANIFEST_DIGEST in its environment (so training code
and the Trainer guard know which manifest they run under), supervised by
``ftmanifest.supervise``: SIGTERM, SIGINT and SIGHUP are passed on to its
process group, which gets ``--grace`` seconds (default $FTMANIFEST_GRACE, else
30) to end before SIGKILL, and nothing of it outlives ``run``.

Exit codes: the command's own, or 128+N when signal N ended it; 126 CMD cannot
be executed, 127 CMD not found (as a shell); before CMD starts, 1 drift and 2
unusable input or usage, or N for both with ``--refused-exit N``, so a caller
can tell a refusal from the command's own codes.  Argument parsing errors stay
2: they happen before any option is read; a command given without ``--`` is one,
and its message shows the line with ``--`` in place (``cli.unrecognized``).

Every run is one *attempt* in the ledger (``ftmanifest ledger``): ``refused``
(nothing ran), ``started`` (with the drifts accepted on purpose and the
manifest's body; if an acceptance cannot be recorded, nothing runs), then
``completed`` or ``failed`` with the exit status and the budget used, or
``not-started`` when CMD could not be executed.  A run stopped by SIGINT,
SIGTERM, SIGHUP or SIGQUIT is ``abandoned``, with ``--abandon-reason`` (or
``--reason`` when no ``--accept`` is given), else the answer to a question on
a terminal, else the signal's name.  The attempt id is passed to CMD as
$FTMANIFEST_ATTEMPT so the Trainer guard's records join it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._verify_report import (
    accepted_fields,
    add_verify_arguments,
    record_acceptances,
    report_and_print,
)
from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.ledger import Ledger, new_attempt, runrecord
from ftmanifest.ledger.attempts import attempts
from ftmanifest.ledger.guardreport import GUARD_REPORTS_ENV, read_reports
from ftmanifest.probe.git import repository_root
from ftmanifest.safe_text import escape
from ftmanifest.supervise import DEFAULT_GRACE, supervise
from ftmanifest.verify.acceptances import apply_acceptances
from ftmanifest.verify.child import (
    ChildRefusedError,
    check_module_pinned,
    child_findings,
    probe_child,
    startup_findings,
)
from ftmanifest.verify.command import check_script_pinned
from ftmanifest.verify.launch import UnattributedCommandError, attribute

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport

GRACE_ENV = "FTMANIFEST_GRACE"


DESCRIPTION = """\
Verify the manifest as `ftmanifest verify` does, then run CMD (everything
after --) with FTMANIFEST_MANIFEST, FTMANIFEST_DIGEST and FTMANIFEST_ATTEMPT
in its environment; on drift nothing runs.  SIGTERM, SIGINT and SIGHUP are
passed on to CMD's process group, which gets --grace seconds before SIGKILL.
Every run is one attempt in the ledger.  Exit codes: CMD's own, 128+N when
signal N ended it, 126/127 CMD not executable / not found; before CMD starts,
1 drift and 2 unusable input, or N for both with --refused-exit N.
"""

EXAMPLES = """\
examples:
  ftmanifest run exp.yaml -- python train.py --config cfg.yaml
  ftmanifest run exp.yaml --refused-exit 86 --grace 60 -- torchrun --nproc-per-node 8 train.py
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="verify a manifest, then run the training command",
        usage="ftmanifest run [options] MANIFEST -- CMD [ARG ...]",
    )
    add_verify_arguments(p)
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
    p.add_argument(
        "--guarded",
        action="store_true",
        help="CMD calls the guard in every process that trains (ftmanifest.guard or the "
        "Trainer callback): run starts a command it cannot attribute to one Python "
        "interpreter (a shell string, a launcher) and refuses the run when no guard reported",
    )
    p.add_argument(
        "--abandon-reason",
        metavar="TEXT",
        help="why, if the run is stopped by a signal (recorded as abandoned); "
        "asked on a terminal when not given",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

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
        abandon_reason = _abandon_reason(args)
        report, code = report_and_print(args)
    except FtManifestError as exc:
        if args.refused_exit is not None:
            exc.exit_code = args.refused_exit  # this one refusal, not its whole class
        raise
    attempt = _attempt(report, args.ledger)
    if not report.ok:
        _record(report, "refused", command, attempt=attempt, ledger=args.ledger)
        sys.stderr.write("ftmanifest: not running the command: the manifest does not match\n")
        return code if args.refused_exit is None else int(args.refused_exit)
    try:  # the code that trains must be the code pinned
        pinned = report.loaded.manifest.environment.code.commit if report.loaded else None
        check_script_pinned(command, report.manifest_path, pinned, args.code)
    except FtManifestError as exc:
        _record(report, "refused", command, attempt=attempt, ledger=args.ledger)
        if args.refused_exit is not None:
            exc.exit_code = args.refused_exit
        raise
    env = {
        **os.environ,
        "FTMANIFEST_MANIFEST": str(args.manifest.resolve()),
        "FTMANIFEST_DIGEST": report.manifest_digest,
        runrecord.ATTEMPT_ENV: attempt,
        "FTMANIFEST_LEDGER": str(runrecord.records_path(report.manifest_path, args.ledger)),
    }
    try:  # the interpreter that will train, not this one
        _check_interpreter(command, env, report, args)
    except FtManifestError as exc:
        _record(report, "refused", command, attempt=attempt, ledger=args.ledger)
        if args.refused_exit is not None:
            exc.exit_code = args.refused_exit
        raise
    reports_dir = None
    if args.guarded:
        import tempfile

        reports_dir = tempfile.mkdtemp(prefix="ftmanifest-guard-")
        env[GUARD_REPORTS_ENV] = reports_dir
    started = runrecord.now()
    if report.accepted:
        try:  # an acceptance that cannot be recorded is not made: nothing runs
            record_acceptances(
                report, "started", command=command, attempt=attempt, ledger=args.ledger
            )
        except FtManifestError as exc:
            if args.refused_exit is not None:
                exc.exit_code = args.refused_exit
            raise
    else:
        _record(report, "started", command, attempt=attempt, ledger=args.ledger)
    sys.stdout.flush()
    sys.stderr.flush()
    stopped: list[Any] = []
    try:
        status = supervise(command, env, grace=grace, stopped=stopped)
    except FtManifestError as exc:
        _record(report, "not-started", command, attempt=attempt, ledger=args.ledger,
                started_at=started, error=exc.message)  # fmt: skip
        raise
    finished = runrecord.now()
    extra: dict[str, Any] = {
        "started_at": started,
        "exit_code": status,
        "budget_used": runrecord.used(started, finished, runrecord.devices(report)),
    }
    unguarded = _unguarded(reports_dir, report.manifest_digest) if reports_dir else None
    if unguarded is not None and not stopped:
        # what ran was never verified: a failed attempt, and never exit 0
        extra["reason"] = unguarded if status == 0 else f"exit status {status}; {unguarded}"
        _record(report, "failed", command, attempt=attempt, ledger=args.ledger, **extra)
        sys.stderr.write(f"ftmanifest: REFUSED after the command ended: {unguarded}\n")
        if status != 0:
            return status
        return 1 if args.refused_exit is None else int(args.refused_exit)
    if stopped:
        why = abandon_reason or _ask_reason(stopped[0].name)
        extra["reason"] = why
        extra["signal"] = stopped[0].name
        _record(report, "abandoned", command, attempt=attempt, ledger=args.ledger, **extra)
    elif status == 0:
        _record(report, "completed", command, attempt=attempt, ledger=args.ledger, **extra)
    else:
        extra["reason"] = f"exit status {status}"
        _record(report, "failed", command, attempt=attempt, ledger=args.ledger, **extra)
    return status


def _check_interpreter(
    command: list[str], env: dict[str, str], report: VerifyReport, args: argparse.Namespace
) -> None:
    """Refuse unless the command's own interpreter is the one the manifest pins
    (probed with the command's environment), or, for a command that cannot be
    attributed to one interpreter, unless the guard inside it will report."""
    from pathlib import Path

    launch = attribute(command, env, Path.cwd())
    if not launch.attributed:
        if args.guarded or launch.missing:
            return  # the guard will report; or nothing can start (127, as a shell)
        raise UnattributedCommandError(
            "run cannot tell which Python interpreter this command trains with",
            field="CMD",
            expected="a Python command (python train.py, python -m train, torchrun ...), "
            "or --guarded with the guard inside the training process",
            observed=f"{' '.join(command)[:200]}: {launch.why}",
            hint="run the script with python directly; or call ftmanifest.guard(MANIFEST) first "
            "in the training script (the Trainer callback also reports) and pass --guarded",
        )
    if report.loaded is None or report.observed is None:
        return
    manifest = report.loaded.manifest
    child = probe_child(launch, env, Path.cwd())
    rows = _accepting(
        child_findings(manifest, report.observed, child, {**env, **launch.env}), args
    )[0]
    rows += startup_findings(
        launch, env, Path.cwd(), manifest, report.manifest_path, code_dir=args.code
    )  # start-up code is allowed by the signed manifest only, never by --accept
    pinned = manifest.environment.code.commit
    root = repository_root(Path(os.path.abspath(args.code or report.manifest_path.parent)))
    check_module_pinned(child, root, pinned)
    if rows:
        raise ChildRefusedError(
            f"the command's interpreter {launch.interpreter} is not the environment the "
            "manifest pins",
            findings=rows,
            hint="run the command with the pinned interpreter and packages (or lock again "
            "in the environment that trains)",
        )


def _accepting(rows: list[Any], args: argparse.Namespace) -> tuple[list[Any], list[Any], Any]:
    """``rows`` less those the command line accepts on purpose (``--accept FIELD``)."""

    return apply_acceptances(rows, accepted_fields(args))


def _unguarded(reports_dir: str, digest: str) -> str | None:
    """Why the run is refused after the fact: no guard reported, or one verified
    another manifest; None when a guard verified this one.  The folder is removed."""
    import shutil
    from pathlib import Path

    try:
        reports = read_reports(Path(reports_dir))
    finally:
        shutil.rmtree(reports_dir, ignore_errors=True)
    if not reports:
        return (
            "--guarded, but no process of the command reported a passing guard: call "
            "ftmanifest.guard(MANIFEST) first in the training script"
        )
    other = [r for r in reports if r.manifest_digest != digest]
    if other:
        return f"a guard verified another manifest ({other[0].manifest_digest}) than {digest}"
    return None


def _attempt(report: VerifyReport, ledger: Any) -> str:
    """This run's attempt: the experiment's planned one for this very manifest, else new."""

    try:
        entries = Ledger(runrecord_dir(report, ledger)).read().entries
    except OSError:
        return new_attempt()
    for a in reversed(attempts(entries)):
        if a.status == "planned" and a.manifest_digest == report.manifest_digest:
            return a.id
    return new_attempt()


def runrecord_dir(report: VerifyReport, ledger: Any) -> Any:

    return runrecord.records_path(report.manifest_path, ledger)


def _abandon_reason(args: argparse.Namespace) -> str | None:
    """``--abandon-reason``, or a lone ``--reason`` when nothing is accepted."""
    if args.abandon_reason is not None:
        return str(args.abandon_reason).strip() or None
    if not args.accept and len(args.reason) == 1:
        text = str(args.reason.pop()).strip()
        return text or None
    return None


def _ask_reason(signal_name: str) -> str:
    default = f"stopped by {signal_name}"
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return default
    try:
        sys.stderr.write(f"ftmanifest: the run was stopped ({signal_name}); why? [{default}] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip()
    except (OSError, KeyboardInterrupt, EOFError):
        return default
    return answer or default


def _record(
    report: VerifyReport,
    status: str,
    command: list[str],
    *,
    attempt: str,
    ledger: Any,
    **extra: Any,
) -> None:
    """Append a run record; a run is not stopped because its record could not be written."""

    try:
        runrecord.append(
            report.manifest_path,
            runrecord.build(
                report,
                status=status,
                command=command,
                attempt=attempt,
                ledger=ledger,
                **({"finished_at": runrecord.now()} if status != "started" else {}),
                **extra,
            ),
            ledger=ledger,
        )
    except OSError as exc:
        path = runrecord.records_path(report.manifest_path, ledger)
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
