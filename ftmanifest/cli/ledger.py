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
that signs, ``list`` counts only records signed by a trusted key.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument
from ftmanifest.errors import InputNotFoundError, UsageError
from ftmanifest.fsutil import write_error
from ftmanifest.ledger import Ledger, ledger_dir, new_attempt, runrecord
from ftmanifest.ledger.attempts import attempts, counts, family, find, over_budget, parents
from ftmanifest.ledger.evidence import check_ledger, choose_ledger_trust, evidence, signs
from ftmanifest.ledger.runrecord import check_reason
from ftmanifest.ledger.starts import different_starts
from ftmanifest.ledger.summary import budget_of
from ftmanifest.manifest import load_manifest
from ftmanifest.output import table, to_json
from ftmanifest.safe_text import escape

SHOWN_UNTRUSTED = 10  # untrusted records named one by one in the text output

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
        "list": _list,
        "show": _show,
        "check": _check,
        "plan": _plan,
        "abandon": _mark,
        "invalidate": _mark,
    }[args.action]
    return handler(store, args)


def _out(text: str) -> None:
    sys.stdout.write(text)


def _json(payload: Any) -> None:

    _out(to_json(payload))


def _list(store: Any, args: argparse.Namespace) -> int:

    contents = store.read()
    found = _evidence(store, contents, args)
    items = attempts(found.entries)
    if args.experiment:
        items = [a for a in items if a.experiment == args.experiment]
    if args.family:
        members = family(args.family, parents(contents.entries))
        items = [a for a in items if a.experiment in members]
    # preflight records are checks before a run, not attempts at one
    checks = [a for a in items if _is_preflight(a)]
    items = [a for a in items if not _is_preflight(a)]
    over = {a.id: over_budget(a, budget_of(a, {})) for a in items}
    starts = different_starts(items)  # same manifest, another start: not the same run
    tally = counts(items)
    if args.format == "json":
        _json({
            "ledger": str(store.root),
            "attempts": [{**a.to_dict(), "over_budget": over[a.id],
                          "different_start": starts.get(a.id, [])} for a in items],
            "preflights": [_preflight_dict(a) for a in checks],
            "counts": tally,
            "findings": [p.finding().to_dict() for p in contents.problems],
            "problems": [p.__dict__ for p in contents.problems],  # before "findings"
            "untrusted": [u.to_dict() for u in found.untrusted],
        })  # fmt: skip
        return 0
    if not items:
        where = escape(str(store.root))
        _out(f"no attempts in {where}\n" if store.exists() else f"no ledger at {where} yet\n")
    else:
        rows, notes = [], []
        for a in items:
            u = a.used
            rows.append((
                a.id, a.experiment or "-", a.status, (a.started_at or "-")[:16].replace("T", " "),
                "-" if u["steps"] is None else u["steps"],
                "-" if u["hours"] is None else f"{u['hours']:.3f}",
                "-" if u["gpu_hours"] is None else f"{u['gpu_hours']:.3f}",
            ))  # fmt: skip
            note = [("reason", a.reason)] if a.reason else []
            note += [("over budget", "; ".join(over[a.id]))] if over[a.id] else []
            note += [("different start", n) for n in starts.get(a.id, [])]
            notes.append(note)
        header = ("attempt", "experiment", "status", "started", "steps", "hours", "gpu-h")
        _out(table(rows, header, nowrap=(0, 1, 2, 3), notes=notes))
        summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        _out(f"{len(items)} attempt(s): {summary}\n")
    if checks:
        check_rows = [
            (d["record"], d["experiment"] or "-", (d["at"] or "-")[:16].replace("T", " "),
             "passed" if d["ok"] else "FAILED", ", ".join(d["failed"]) or "-")
            for d in map(_preflight_dict, checks)
        ]  # fmt: skip
        _out("\npreflight checks (not attempts):\n")
        check_header = ("record", "experiment", "at", "result", "failed")
        _out(table(check_rows, check_header, nowrap=(0, 1, 2)))
    for p in contents.problems:
        _out(f"warning: {escape(p.rule)}: {escape(p.message)} ({escape(p.file)})\n")
    for u in found.untrusted[:SHOWN_UNTRUSTED]:
        _out(f"warning: {escape(u.warning())}\n")
    if len(found.untrusted) > SHOWN_UNTRUSTED:
        _out(f"warning: {len(found.untrusted) - SHOWN_UNTRUSTED} more untrusted record(s) "
             "(--format json lists them)\n")  # fmt: skip
    return 0


def _is_preflight(a: Any) -> bool:
    return bool(a.entries) and all(e.record.get("status") == "preflight" for e in a.entries)


def _preflight_dict(a: Any) -> dict[str, Any]:
    """One preflight record as ``ledger list`` shows it: when, of what, and which checks failed."""
    e = a.entries[-1]
    rows = e.record.get("rows")
    failed = [
        str(r.get("name"))
        for r in (rows if isinstance(rows, list) else [])
        if isinstance(r, dict) and r.get("ok") is False
    ]
    return {
        "record": e.short,
        "experiment": a.experiment,
        "at": e.at or None,
        "ok": e.record.get("ok") is True,
        "failed": failed,
    }


def _evidence(store: Any, contents: Any, args: argparse.Namespace) -> Any:
    """The records that count: in a ledger that signs, those signed by a key
    the project trusts."""

    if not signs(contents.entries):
        return evidence(contents.entries, None)
    trust = choose_ledger_trust(store.root, args.manifest, args.trust)
    return evidence(contents.entries, trust)


def _resolve(store: Any, wanted: str) -> Any:

    items = attempts(store.read().entries)
    hits = find(items, wanted)
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise UsageError(
            f"no attempt {wanted!r} in the ledger",
            path=str(store.root),
            field="ID",
            expected="an attempt id, a record id prefix (6+ hex) or an experiment id",
            observed=wanted,
            hint="`ftmanifest ledger list` shows the attempts",
        )
    raise UsageError(
        f"{wanted!r} names {len(hits)} attempts",
        path=str(store.root),
        field="ID",
        expected="exactly one attempt",
        observed=", ".join(a.id for a in hits[:8]),
        hint="give the whole attempt id",
    )


def _show(store: Any, args: argparse.Namespace) -> int:

    attempt = _resolve(store, args.id)
    # same manifest, another start (weights or first batch): not the same run
    starts = different_starts(attempts(store.read().entries)).get(attempt.id, [])
    if args.format == "json":
        _json({**attempt.to_dict(), "different_start": starts, "records": [
            {"id": e.id, "file": str(e.file), "signed": e.signature is not None, **e.record}
            for e in attempt.entries]})  # fmt: skip
        return 0
    _out(f"attempt {attempt.id}  experiment {escape(str(attempt.experiment))}  "
         f"status {attempt.status}\n")  # fmt: skip
    for note in starts:
        _out(escape(f"  different start: {note}") + "\n")
    for e in attempt.entries:
        r = e.record
        line = f"  {e.at[:26]}  {str(r.get('status', '?')):<11} {e.short}"
        if r.get("exit_code") is not None:
            line += f"  exit {r['exit_code']}"
        if r.get("reason"):
            line += f"  reason: {r['reason']}"
        if isinstance(r.get("accepted"), list) and r["accepted"]:
            line += f"  {len(r['accepted'])} drift(s) accepted"
        sealed = r.get("sealed")
        if isinstance(sealed, dict):
            line += f"  sealed split {sealed.get('split')} use {sealed.get('use')}"
        _out(escape(line) + "\n")
    for t in attempt.trackers:
        where = t.get("uri") or t.get("project") or "-"
        line = f"  tracker {t.get('kind')} run {t.get('run_id')}  ({where})"
        if t.get("error"):
            line += f"  not tagged: {t['error']}"
        _out(escape(line) + "\n")
    for b in attempt.adapter_bindings:
        how = "bound" if b.get("bound") else f"NOT bound: {b.get('reason')}"
        _out(escape(f"  adapter {b.get('path')}  {how}") + "\n")
    return 0


def _check(store: Any, args: argparse.Namespace) -> int:

    if not store.exists():
        raise InputNotFoundError(
            "there is no ledger to check",
            path=str(store.root),
            expected="a ledger folder",
            observed="not found (or not a folder)",
            hint="pass --ledger DIR or --manifest M; `ftmanifest run` creates the ledger",
        )

    trust = choose_ledger_trust(store.root, args.manifest, args.trust)
    contents, problems = check_ledger(
        store, trust, require_signed=args.require_signed, heads=args.head
    )
    heads = [e.id for e in contents.heads()]
    signed = sum(1 for e in contents.entries if e.signature is not None)
    checked = trust.store is not None
    if args.format == "json":
        _json({
            "ledger": str(store.root), "ok": not problems, "records": len(contents.entries),
            "signed": signed, "signatures_checked": checked, "trust": trust.to_dict(),
            "heads": heads, "findings": [p.finding().to_dict() for p in problems],
            "problems": [p.__dict__ for p in problems],  # before "findings"; kept for a release
        })  # fmt: skip
        return 1 if problems else 0
    if problems:
        rows = [(p.rule, p.file, p.message, p.expected or "", p.observed or "") for p in problems]
        _out(table(rows, ("rule", "file", "problem", "expected", "observed")))
        for rule, hint in dict.fromkeys((p.rule, p.hint) for p in problems if p.hint):
            _out(f"fix ({escape(rule)}): {escape(hint)}\n")
        _out(f"ledger NOT ok: {len(problems)} problem(s) in {escape(str(store.root))}\n")
        return 1
    how = "checked" if checked else f"not checked: no trust file at {_missing_at(trust)}"
    _out(
        f"ledger ok: {len(contents.entries)} record(s), {signed} signed"
        + (f" ({escape(how)})" if signed else "")
        + ", "
        f"head(s) {', '.join(h.removeprefix('sha256:')[:16] for h in heads) or '-'}\n"
    )
    return 0


def _missing_at(trust: Any) -> str:
    return str(trust.missing.file) if trust.missing is not None else "-"


def _plan(store: Any, args: argparse.Namespace) -> int:

    path = args.plan_manifest
    loaded = load_manifest(path)
    record = {
        "status": "planned",
        "attempt": new_attempt(),
        "experiment": runrecord.experiment_of(loaded),
        "manifest": runrecord.manifest_ref(
            path, loaded.digest(), store.root, loaded=loaded, body=True
        ),
    }
    if args.reason:
        record["note"] = args.reason
    entry = _append(store, record)
    if args.format == "json":
        _json({"attempt": record["attempt"], "record": entry.id, "file": str(entry.file)})
    else:
        _out(f"planned: attempt {record['attempt']} of {escape(str(loaded.manifest.experiment.id))}"
             f" ({escape(str(entry.file))})\n")  # fmt: skip
    return 0


def _mark(store: Any, args: argparse.Namespace) -> int:
    import ftmanifest

    reason = check_reason(args.reason)
    attempt = _resolve(store, args.id)
    record = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": args.mark,
        "reason": reason,
        "attempt": attempt.id,
        "experiment": {"id": attempt.experiment, "parent": attempt.parent},
        "manifest": {"digest": attempt.manifest_digest},
    }
    entry = _append(store, record)
    if args.format == "json":
        _json({"attempt": attempt.id, "status": args.mark, "record": entry.id})
    else:
        _out(f"{args.mark}: attempt {attempt.id} ({escape(str(attempt.experiment))}): "
             f"{escape(reason)}\n")  # fmt: skip
    return 0


def _append(store: Any, record: dict[str, Any]) -> Any:

    try:
        return store.append(record)
    except OSError as exc:
        raise write_error(exc, store.root, "cannot write to the ledger") from None
