"""``ledger list``, ``show`` and ``check``: what the ledger holds, shown and judged.

Layer: commands (private to ``ftmanifest.cli``: ``cli.ledger`` dispatches here).  These
actions only read the ledger: ``list`` shows the attempts and preflight checks (in a
ledger that signs, counting only records a trusted key signed), ``show`` one attempt's
records, ``check`` the verdict of ``ledger.evidence.check_ledger`` with exit 1 on any
problem.  ``resolve`` finds the one attempt an ID names, for ``show`` and the marks.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ftmanifest.errors import InputNotFoundError, UsageError
from ftmanifest.ledger.attempts import attempts, counts, family, find, over_budget, parents
from ftmanifest.ledger.evidence import check_ledger, choose_ledger_trust, evidence, signs
from ftmanifest.ledger.starts import different_starts
from ftmanifest.ledger.summary import budget_of
from ftmanifest.output import table, to_json
from ftmanifest.safe_text import escape

SHOWN_UNTRUSTED = 10  # untrusted records named one by one in the text output


def out(text: str) -> None:
    sys.stdout.write(text)


def print_json(payload: Any) -> None:

    out(to_json(payload))


def run_list(store: Any, args: argparse.Namespace) -> int:

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
        print_json({
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
        out(f"no attempts in {where}\n" if store.exists() else f"no ledger at {where} yet\n")
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
        out(table(rows, header, nowrap=(0, 1, 2, 3), notes=notes))
        summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        out(f"{len(items)} attempt(s): {summary}\n")
    if checks:
        check_rows = [
            (d["record"], d["experiment"] or "-", (d["at"] or "-")[:16].replace("T", " "),
             "passed" if d["ok"] else "FAILED", ", ".join(d["failed"]) or "-")
            for d in map(_preflight_dict, checks)
        ]  # fmt: skip
        out("\npreflight checks (not attempts):\n")
        check_header = ("record", "experiment", "at", "result", "failed")
        out(table(check_rows, check_header, nowrap=(0, 1, 2)))
    for p in contents.problems:
        out(f"warning: {escape(p.rule)}: {escape(p.message)} ({escape(p.file)})\n")
    for u in found.untrusted[:SHOWN_UNTRUSTED]:
        out(f"warning: {escape(u.warning())}\n")
    if len(found.untrusted) > SHOWN_UNTRUSTED:
        out(f"warning: {len(found.untrusted) - SHOWN_UNTRUSTED} more untrusted record(s) "
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


def resolve(store: Any, wanted: str) -> Any:

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


def run_show(store: Any, args: argparse.Namespace) -> int:

    attempt = resolve(store, args.id)
    # same manifest, another start (weights or first batch): not the same run
    starts = different_starts(attempts(store.read().entries)).get(attempt.id, [])
    if args.format == "json":
        print_json({**attempt.to_dict(), "different_start": starts, "records": [
            {"id": e.id, "file": str(e.file), "signed": e.signature is not None, **e.record}
            for e in attempt.entries]})  # fmt: skip
        return 0
    out(f"attempt {attempt.id}  experiment {escape(str(attempt.experiment))}  "
        f"status {attempt.status}\n")  # fmt: skip
    for note in starts:
        out(escape(f"  different start: {note}") + "\n")
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
        out(escape(line) + "\n")
    for t in attempt.trackers:
        where = t.get("uri") or t.get("project") or "-"
        line = f"  tracker {t.get('kind')} run {t.get('run_id')}  ({where})"
        if t.get("error"):
            line += f"  not tagged: {t['error']}"
        out(escape(line) + "\n")
    for b in attempt.adapter_bindings:
        how = "bound" if b.get("bound") else f"NOT bound: {b.get('reason')}"
        out(escape(f"  adapter {b.get('path')}  {how}") + "\n")
    return 0


def run_check(store: Any, args: argparse.Namespace) -> int:

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
        print_json({
            "ledger": str(store.root), "ok": not problems, "records": len(contents.entries),
            "signed": signed, "signatures_checked": checked, "trust": trust.to_dict(),
            "heads": heads, "findings": [p.finding().to_dict() for p in problems],
            "problems": [p.__dict__ for p in problems],  # before "findings"; kept for a release
        })  # fmt: skip
        return 1 if problems else 0
    if problems:
        rows = [(p.rule, p.file, p.message, p.expected or "", p.observed or "") for p in problems]
        out(table(rows, ("rule", "file", "problem", "expected", "observed")))
        for rule, hint in dict.fromkeys((p.rule, p.hint) for p in problems if p.hint):
            out(f"fix ({escape(rule)}): {escape(hint)}\n")
        out(f"ledger NOT ok: {len(problems)} problem(s) in {escape(str(store.root))}\n")
        return 1
    how = "checked" if checked else f"not checked: no trust file at {_missing_at(trust)}"
    out(
        f"ledger ok: {len(contents.entries)} record(s), {signed} signed"
        + (f" ({escape(how)})" if signed else "")
        + ", "
        f"head(s) {', '.join(h.removeprefix('sha256:')[:16] for h in heads) or '-'}\n"
    )
    return 0


def _missing_at(trust: Any) -> str:
    return str(trust.missing.file) if trust.missing is not None else "-"
