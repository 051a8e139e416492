"""``ftmanifest prune DIR [--manifest M | --keep-* ...] [--apply]``.

Layer: commands - edge (parsing and printing; the policy and the work are
``ftmanifest.backup.prune``).
The policy is the signed manifest's ``security.retention.backups`` (its
experiment's backups only) or the ``--keep-*`` options (every backup of DIR,
grouped by experiment and kind).  A dry run unless ``--apply``.  Exit 0
planned or pruned, 1 refused (an empty policy, or a backup that cannot be
verified: listed and kept), 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.backup.prune import apply, plan, retention_policy
from ftmanifest.cli._args import BACKUP_TRUST_HELP, add_format_argument
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, InputError, InputNotFoundError
from ftmanifest.output import findings_table, to_json
from ftmanifest.safe_text import escape

_KEEPS = ("last", "hourly", "daily", "weekly", "monthly", "yearly")


DESCRIPTION = """\
Delete old backups by a retention policy: the signed manifest's
security.retention.backups (its experiment's backups only), or the --keep-*
options (every backup of DIR, grouped by experiment and kind).  A dry run
that prints the plan unless --apply.  Exit 0 planned or pruned, 1 refused
(an empty policy, or a backup that cannot be verified: listed and kept),
2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest prune backups/ --manifest exp.yaml
  ftmanifest prune backups/ --keep-last 3 --keep-daily 7 --keep-within 30d --apply
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prune",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="delete backups the retention policy does not keep",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="the backups folder")
    p.add_argument(
        "--manifest",
        type=Path,
        metavar="MANIFEST",
        help="the manifest whose security.retention.backups applies (signature checked)",
    )
    for name in _KEEPS:
        p.add_argument(
            f"--keep-{name}",
            type=int,
            metavar="N",
            help=f"keep the {'N newest' if name == 'last' else 'newest of N ' + name}"
            " backups per group",
        )
    p.add_argument(
        "--keep-within",
        metavar="DURATION",
        help="keep every backup made within DURATION before now (e.g. 30d, 1y6m)",
    )
    act = p.add_mutually_exclusive_group()
    act.add_argument("--apply", action="store_true", help="delete (default: only show the plan)")
    act.add_argument("--dry-run", action="store_true",
                     help="show the plan, delete nothing (the default, said out loud)")  # fmt: skip
    p.add_argument("--trust", type=Path, metavar="PATH", help=BACKUP_TRUST_HELP)
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    keeps = {f"keep_{n}": getattr(args, f"keep_{n}") for n in (*_KEEPS, "within")}
    policy = retention_policy(keeps, args.manifest, trust_path=args.trust)
    if not args.folder.is_dir():
        if not args.folder.exists():
            raise InputNotFoundError("backup folder not found", path=str(args.folder))
        raise InputError("not a folder", path=str(args.folder), expected="the backups folder")
    result = plan(args.folder, policy.policy_of, experiment_id=policy.experiment_id,
                  trust_path=args.trust)  # fmt: skip
    if args.apply:
        apply(args.folder, result, policy.as_data)
    # a backup from the future is a warning: kept, but no reason to refuse
    code = EXIT_REFUSED if any(f.severity == "error" for f in result.problems) else EXIT_OK
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "folder": str(args.folder),
                    "applied": args.apply,
                    "policy": policy.as_data,
                    "decisions": [
                        {
                            "backup_id": d.item.backup_id,
                            "kind": d.item.group[1],
                            "experiment_id": d.item.group[0] or None,
                            "created": result.metas[d.item.backup_id].predicate()["created"],
                            "keep": d.keep,
                            "reasons": list(d.reasons),
                        }
                        for d in result.decisions
                    ],
                    "deleted": result.deleted,
                    "not_covered": [m.backup_id for m in result.outside],
                    "findings": [f.to_dict() for f in result.problems],
                    "problems": [f.to_dict() for f in result.problems],  # before "findings"
                }
            )
        )
        return code
    out = sys.stdout
    for d in result.decisions:
        meta = result.metas[d.item.backup_id]
        verdict = "keep   " if d.keep else ("deleted" if args.apply else "remove ")
        why = ", ".join(d.reasons) if d.keep else "no rule keeps it"
        out.write(
            f"{verdict}  {meta.backup_id}  {meta.predicate()['created']}  "
            f"{escape(meta.experiment_id or '-')}  {why}\n"
        )
    for m in result.outside:
        out.write(
            f"skip     {m.backup_id}  another experiment ({escape(m.experiment_id or '-')})\n"
        )
    if result.problems:
        out.write("\nnot judged (kept):\n" + findings_table(result.problems))
    removed = sum(1 for d in result.decisions if not d.keep)
    if args.apply:
        out.write(
            f"\n{removed} backup(s) deleted, recorded in "
            f"{escape(str(args.folder / 'prune-log.jsonl'))}\n"
        )
    else:
        out.write(f"\n{removed} backup(s) would be deleted (dry run; pass --apply to delete)\n")
    return code
