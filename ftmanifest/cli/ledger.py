"""``ftmanifest ledger list|show|check|plan|abandon|invalidate``: the experiment ledger.

Layer: commands - edge.  The ledger (``ftmanifest.ledger``) is the folder of hash-linked
records that ``run``, the Trainer guard, ``verify --accept``, ``unseal`` and
``score`` write.  ``list`` shows every attempt with its outcome, abandoned and
invalid ones included and counted; ``show ID`` every record of an attempt
(an attempt id, a record id prefix, or an experiment id: its latest attempt);
``check`` judges the ledger as a whole (exit 1 on an edited, removed or
reordered record, a bad signature, or a known head that is gone); ``plan M``
records a planned attempt; ``abandon``/``invalidate ID --reason TEXT`` mark
an attempt.  The ledger folder is ``--ledger DIR``, else the one of
``--manifest M``'s repository (the flag beats the environment), else
$FTMANIFEST_LEDGER, else ``.ftmanifest/ledger`` at the root of the current
folder's repository.  Signatures are judged by the project's trust file
(``ftmanifest.ledger.evidence``), never by one beside the ledger; in a ledger
that signs, ``list`` counts only records signed by a trusted key.  The reading
actions live in ``cli._ledger_read``, the appending ones in ``cli._ledger_mark``;
this module holds the parser and the dispatch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ftmanifest.cli._args import add_format_argument
from ftmanifest.cli._ledger_mark import run_mark, run_plan
from ftmanifest.cli._ledger_read import run_check, run_list, run_show
from ftmanifest.ledger import Ledger, ledger_dir

DESCRIPTION = """\
The experiment ledger: the folder of hash-linked records that run, the
Trainer guard, verify --accept, unseal and score write.  The folder is
--ledger DIR, else the one of --manifest M's repository, else
$FTMANIFEST_LEDGER, else .ftmanifest/ledger at the root of the current
folder's repository.
"""

EXAMPLES = """\
examples:
  ftmanifest ledger list
  ftmanifest ledger check --manifest exp.yaml
  ftmanifest ledger show docroute-lora-r16
"""

LIST_DESCRIPTION = """\
Every attempt in the ledger with its outcome, abandoned and invalid ones
included and counted; --experiment or --family narrows the list.  In a
ledger that signs (a record is signed or $FTMANIFEST_LEDGER_KEY is set),
only records signed by a key in the project's trust file count; the others
are listed as untrusted.  Exit 0, 2 an unusable ledger.
"""

LIST_EXAMPLES = """\
examples:
  ftmanifest ledger list
  ftmanifest ledger list --family docroute-lora-r16 --format json
"""

SHOW_DESCRIPTION = """\
Every record of one attempt.  ID is an attempt id, a record id prefix, or an
experiment id (its latest attempt).  Exit 0, 2 no such attempt or an
unusable ledger.
"""

SHOW_EXAMPLES = """\
examples:
  ftmanifest ledger show docroute-lora-r16
  ftmanifest ledger show 3f9a1c2b --format json
"""

CHECK_DESCRIPTION = """\
Judge the ledger as a whole: every record's hash link and time and, where
a record is signed, its signature by a key in the project's trust file
(--trust, else $FTMANIFEST_TRUST_FILE, else .ftmanifest/allowed_signers at
the root of --manifest M's or the current folder's repository; never a file
beside the ledger).  Exit 0 intact, 1 an edited, removed or reordered record,
one dated in the future, a bad signature, an unsigned record or no trust
file under --require-signed, or a --head that is gone; 2 unusable input.
"""

CHECK_EXAMPLES = """\
examples:
  ftmanifest ledger check
  ftmanifest ledger check --manifest exp.yaml --require-signed
"""

PLAN_DESCRIPTION = """\
Record a planned attempt of a manifest in the ledger (before it runs), with
an optional reason.  Exit 0 recorded, 2 unusable input.
"""

PLAN_EXAMPLES = """\
examples:
  ftmanifest ledger plan exp.yaml --reason 'the r32 variant, after r16'
"""

ABANDON_DESCRIPTION = """\
Mark an attempt abandoned: it was stopped and its results are not to be
used.  A new record is appended; nothing is edited.  ID is an attempt id, a
record id prefix, or an experiment id (its latest attempt).  Exit 0 recorded,
2 no such attempt or no reason.
"""

ABANDON_EXAMPLES = """\
examples:
  ftmanifest ledger abandon docroute-lora-r16 --reason 'out of budget at step 900'
"""

INVALIDATE_DESCRIPTION = """\
Mark an attempt invalid: its results must not be used (e.g. its data turned
out to be wrong).  A new record is appended; nothing is edited.  ID is an
attempt id, a record id prefix, or an experiment id (its latest attempt).
Exit 0 recorded, 2 no such attempt or no reason.
"""

INVALIDATE_EXAMPLES = """\
examples:
  ftmanifest ledger invalidate docroute-lora-r16 --reason 'test records leaked into train'
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ledger",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="list, show, check or mark the attempts in the ledger",
    )
    actions = p.add_subparsers(
        dest="action", metavar="ACTION", parser_class=type(p), help="what to do with the ledger"
    )
    actions.required = True

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--ledger", type=Path, metavar="DIR", help="the ledger folder")
        q.add_argument(
            "--manifest", type=Path, metavar="M", help="find the ledger from this manifest"
        )
        add_format_argument(q)

    q = actions.add_parser(
        "list",
        description=LIST_DESCRIPTION,
        epilog=LIST_EXAMPLES,
        help="every attempt and its outcome",
    )
    q.add_argument("--experiment", metavar="ID", help="only this experiment")
    q.add_argument("--family", metavar="ID", help="this experiment, its ancestors and variants")
    _trust_argument(q)
    common(q)
    q = actions.add_parser(
        "show",
        description=SHOW_DESCRIPTION,
        epilog=SHOW_EXAMPLES,
        help="every record of one attempt",
    )
    q.add_argument("id", metavar="ID", help="attempt id, record id prefix, or experiment id")
    common(q)
    q = actions.add_parser(
        "check",
        description=CHECK_DESCRIPTION,
        epilog=CHECK_EXAMPLES,
        help="detect edited, removed or reordered records",
    )
    _trust_argument(q)
    q.add_argument(
        "--require-signed",
        action="store_true",
        help="every record must be signed by a trusted key (no trust file: refused)",
    )
    q.add_argument(
        "--head",
        action="append",
        default=[],
        metavar="ID",
        help="a record id known to be in the ledger (from a report); refused when gone",
    )
    common(q)
    q = actions.add_parser(
        "plan",
        description=PLAN_DESCRIPTION,
        epilog=PLAN_EXAMPLES,
        help="record a planned attempt of a manifest",
    )
    q.add_argument("plan_manifest", type=Path, metavar="MANIFEST", help="the manifest")
    q.add_argument("--reason", metavar="TEXT", help="why it is planned (optional)")
    common(q)
    for name, verb, description, examples in (
        ("abandon", "abandoned", ABANDON_DESCRIPTION, ABANDON_EXAMPLES),
        ("invalidate", "invalid", INVALIDATE_DESCRIPTION, INVALIDATE_EXAMPLES),
    ):
        q = actions.add_parser(
            name,
            help=f"mark an attempt {verb}, with a reason",
            description=description,
            epilog=examples,
        )
        q.add_argument("id", metavar="ID", help="attempt id, record id prefix, or experiment id")
        q.add_argument("--reason", required=True, metavar="TEXT", help="why")
        common(q)
        q.set_defaults(mark=verb)
    p.set_defaults(func=run)


def _trust_argument(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--trust",
        type=Path,
        metavar="PATH",
        help="allowed signers for signed records (default: $FTMANIFEST_TRUST_FILE, else "
        ".ftmanifest/allowed_signers at the root of --manifest M's or the current "
        "folder's repository)",
    )


def run(args: argparse.Namespace) -> int:

    plan = getattr(args, "plan_manifest", None)
    # `ledger plan M` files where `run M` would; --manifest only finds the ledger,
    # and as an explicit flag it beats $FTMANIFEST_LEDGER
    store = Ledger(ledger_dir(plan or args.manifest, args.ledger, by_flag=plan is None))
    handler = {
        "list": run_list,
        "show": run_show,
        "check": run_check,
        "plan": run_plan,
        "abandon": run_mark,
        "invalidate": run_mark,
    }[args.action]
    return handler(store, args)
