"""``ftmanifest lock M``: pin the manifest to this machine, model and data, in place.

Layer: commands - edge.  Comments are kept (YAML); ``--dry-run`` prints the diff instead
of writing.  Exit 0 written (or nothing to change), 1 with --dry-run and
--check when the file would change, 2 unusable input.  ``--distributed``
(under torchrun): every rank hashes its share of the files
(``distributed.shard``), rank 0 alone writes the same bytes a plain ``lock``
would, and every rank exits with the job's code (the worst rank's); nothing is
written unless every rank got that far.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._args import (
    add_distributed_arguments,
    add_format_argument,
    add_manifest_argument,
)
from ftmanifest.cli._ranks import deciding, in_job
from ftmanifest.distributed import shard
from ftmanifest.distributed.agree import agree_arguments, agree_on_copies, who
from ftmanifest.distributed.shard import no_rank_timeout
from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.location import format_loc
from ftmanifest.output import note, to_json
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.verify.lock import lock_manifest, write_locked

if TYPE_CHECKING:
    from ftmanifest.verify.lock import LockResult


DESCRIPTION = """\
Pin the manifest to this machine, model and data, in place: the model's
revision as a commit, its files' digests and tree digest, the data's digests
and record counts, the Python and package versions, the backend and the
training code's commit.  YAML comments are kept.
--dry-run prints the diff instead of writing; with --check it exits 1 when
the file would change (for CI).  Exit 0 written (or nothing to change),
1 out of date under --dry-run --check, 2 unusable input.  --format json
prints what changed (or would change) as one object on stdout.
"""

EXAMPLES = """\
examples:
  ftmanifest lock exp.yaml
  ftmanifest lock exp.yaml --dry-run --check
  ftmanifest lock exp.yaml --format json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lock",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="fill in or refresh a manifest's pins from this machine",
    )
    add_manifest_argument(p, "the YAML or JSON manifest to rewrite")
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.add_argument(
        "--check",
        action="store_true",
        help="with --dry-run: exit 1 when the manifest is not up to date",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="rehash every file (ignore the digest cache)"
    )
    p.add_argument(
        "--code",
        type=Path,
        metavar="DIR",
        help="training code folder for the commit (default: the manifest's folder)",
    )
    p.add_argument(
        "--allow-outside",
        action="store_true",
        help="allow data/model paths outside the manifest's repository (or folder)",
    )
    add_format_argument(p)
    add_distributed_arguments(p, "the ranks split the hashing, rank 0 writes, all exit alike")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.distributed:
        return run_distributed(args)
    no_rank_timeout(args.rank_timeout, f"lock {args.manifest}")
    result = lock_manifest(
        args.manifest,
        dry_run=args.dry_run,
        use_cache=not args.no_cache,
        code_dir=args.code,
        allow_outside=args.allow_outside,
    )
    return report(args, result)


def report(args: argparse.Namespace, result: LockResult) -> int:
    """Print what ``lock`` did (or would do, with --dry-run); the exit code."""
    code = 1 if (args.dry_run and args.check and result.changed) else 0
    if getattr(args, "format", "text") == "json":
        sys.stdout.write(to_json(_as_json(args, result, code)))
        return code
    for text in result.notes:
        note(f"note: {text}")
    if args.dry_run:
        sys.stdout.write(result.diff() or f"{args.manifest}: already locked, nothing to change\n")
        return code
    if result.changed:
        note(
            f"locked {args.manifest} ({_lines_changed(result)} line(s) changed); "
            f"{_sign_again(args)[1]}"
        )
    else:
        note(f"{args.manifest}: already locked, nothing to change")
    return 0


def _lines_changed(result: LockResult) -> int:
    return sum(
        1
        for line in result.diff().splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )


def _sign_again(args: argparse.Namespace) -> tuple[bool, str]:
    """Whether an envelope beside the manifest signs its old version; what to run."""

    envelope = envelope_path_for(Path(args.manifest))
    if envelope.exists():  # its signatures cover the manifest as it was
        return True, (
            f"{envelope} signs the old version; sign it again with a new envelope: "
            f"ftmanifest sign {args.manifest} --replace [--key KEY]"
        )
    return False, f"sign it: ftmanifest sign {args.manifest} [--key KEY]"


def _as_json(args: argparse.Namespace, result: LockResult, code: int) -> dict[str, object]:
    stale, next_step = _sign_again(args) if result.changed else (False, None)
    return {
        "manifest": str(args.manifest),
        "written": bool(result.changed and not args.dry_run),
        "changed": result.changed,
        "lines_changed": _lines_changed(result) if result.changed else 0,
        "dry_run": bool(args.dry_run),
        "diff": result.diff() if args.dry_run else None,
        "envelope_signs_old_version": stale and not args.dry_run,
        "next": next_step,
        "notes": list(result.notes),
        "exit_code": code,
    }


LOCK_ARGUMENTS = ("code", "allow_outside", "dry_run", "check")
"""lock's arguments that decide what it writes and its exit: the same on every rank."""


def run_distributed(args: argparse.Namespace) -> int:
    """Every rank hashes its share and locks from the job's digests of its own node's
    files; the ranks compare what they would pin (a node whose copy differs refuses
    the lock on every rank, naming the node), then rank 0 alone writes, and every
    rank exits with the job's code."""

    job, timeout = shard.launched(args.rank_timeout, f"lock {args.manifest}")

    def body(comm: Any) -> int:
        agree_arguments(comm, deciding(args, LOCK_ARGUMENTS))
        planned, failure = shard.plan_manifest(
            comm,
            args.manifest,
            use_cache=not args.no_cache,
            settle=True,  # as lock does: fresh files are cached for the next verify
            allow_outside=args.allow_outside,
        )
        result = None
        if failure is None:
            try:
                result = lock_manifest(
                    args.manifest,
                    dry_run=True,
                    use_cache=not args.no_cache,
                    code_dir=args.code,
                    allow_outside=args.allow_outside,
                    hasher=planned,
                )
            except FtManifestError as exc:
                failure = exc
        codes = shard.exit_codes(comm, failure.exit_code if failure else 0)
        if failure is not None:
            raise failure
        if max(codes):
            return _elsewhere(comm, codes)
        assert result is not None
        agree_on_copies(comm, pins_seen(result.updates), {}, "lock")
        if job.is_main and result.changed and not args.dry_run:
            try:
                write_locked(result)  # rank 0 only, once every rank agreed
            except OSError as exc:
                failure = _unwritable(args, exc)
            except FtManifestError as exc:
                failure = exc
        codes = shard.exit_codes(comm, failure.exit_code if failure else 0)
        if failure is not None:
            raise failure
        if max(codes):
            return _elsewhere(comm, codes)
        if job.is_main:
            return report(args, result)
        stale = args.dry_run and args.check and result.changed
        note(f"rank {job.rank} of {job.world_size}: lock {'out of date' if stale else 'done'}")
        return int(bool(stale))

    return in_job(job, timeout, body, args.format)


def _elsewhere(comm: Any, codes: list[int]) -> int:
    """What a rank says when other ranks failed (their output names why); the job's code."""

    failed = [r for r, c in enumerate(codes) if c]
    sys.stderr.write(
        f"rank {comm.rank} of {comm.world_size}: lock failed (exit {max(codes)}) on "
        f"{who(failed, comm.hosts)}; see its output there\n"
    )
    return max(codes)


def pins_seen(updates: Any) -> dict[str, str]:
    """{field: value} of what lock would pin, a file list by file and a map by key, as
    ranks compare them (text, cut short)."""

    out: dict[str, str] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, list) and all(isinstance(v, dict) and "path" in v for v in value):
            for v in value:
                put(f"{name}[{json.dumps(v['path'])}]", v.get("digest"))
        elif isinstance(value, dict) and value:
            for k in sorted(value):
                put(f"{name}.{k}", value[k])
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[name] = text[:300]

    for loc, value in updates:
        put(format_loc(loc), value)
    return out


def _unwritable(args: argparse.Namespace, exc: OSError) -> FtManifestError:

    return InputError(
        f"cannot write {args.manifest}: {exc.strerror or exc}",
        path=str(args.manifest),
        hint="check the folder's permissions and free space",
    )
