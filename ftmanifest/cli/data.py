"""``ftmanifest data check M``: duplicates between the manifest's splits.

Layer: commands - edge (parsing and printing; the check is ``ftmanifest.data.check``).
Prints exact and near duplicate counts per split pair (train vs eval, train
vs test, eval vs test, within train) and the worst examples side by side;
``--write-clean OUT`` writes the training file without the records that
repeat eval or test and prints the new file's digest for the manifest.

Exit codes: 0 no leakage over the manifest's ``data_checks.tolerance``
(duplicates it allows, or whose count it leaves open, are warnings); 1 more
duplicates in a split pair than it allows (by default: an exact duplicate
between train and test, or any duplicate of a sealed split in another split);
2 unusable input.  The threshold and text fields default to
``data_checks.near_threshold`` and ``data_checks.text_fields``; the
per-record work runs on every core (``--jobs``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli import add_nested
from ftmanifest.cli._args import (
    add_distributed_arguments,
    add_format_argument,
    add_manifest_argument,
)
from ftmanifest.cli._ranks import deciding, print_error
from ftmanifest.data import parallel, ranks
from ftmanifest.data.check import check_data, serve_data
from ftmanifest.distributed import shard
from ftmanifest.distributed.agree import agree_arguments, agree_on_copies, leave_together
from ftmanifest.distributed.comm import joined
from ftmanifest.distributed.shard import launched, no_rank_timeout
from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.manifest import load_manifest
from ftmanifest.output import note, table, to_json
from ftmanifest.progress import Progress
from ftmanifest.safe_text import escape
from ftmanifest.verify.observe import observe_data

SHOWN = 120  # characters of each record in the text output
CATEGORY_ROWS = 50  # categories shown in the text table (the JSON has all)
CHECK_EPILOG = """\
Besides leakage, data check reports:
  categories   records per category and split, where records carry a label
               (data_checks.label; default label, else category).  A train
               category missing from an eval/test split: error when a
               per_category guard is measured there, else warning.  A category
               only in eval/test, fewer than data_checks.min_per_category
               examples (null: 1.92/max_drop^2 from the per_category guard,
               else 20), unlabelled records: warnings.
  lengths      characters, and tokens with the pinned tokenizer when it is
               here offline (never downloaded); records over training.seq_len
               tokens: warning with the longest lines; no tokenizer: warning.
  images       format: images entries (one sub-folder per class): files, sizes
               and modes per class.  Unreadable, symlinked, special, oversized
               or bomb files, and Pillow missing: errors.  The same image in
               train and test or a sealed split: error; other pairs: warning.
  counts       each entry's records and digest against the manifest, as verify
               checks them: a difference is an error (fix: ftmanifest lock).
Exit 1 when any of these is an error, as for refused leakage.
"""


DESCRIPTION = """\
Look at the manifest's data splits: `data check` finds exact and near
duplicates between and within splits (leakage) and checks categories,
lengths, images and counts; `data sample` shows a few records of every
category as the model sees them.
"""

EXAMPLES = """\
examples:
  ftmanifest data check exp.yaml
  ftmanifest data sample exp.yaml --per-category 2
"""

CHECK_DESCRIPTION = """\
Exact and near duplicates between the manifest's splits (train vs eval, train
vs test, eval vs test, within train) with their counts and the worst
examples side by side.  --write-clean OUT writes the training file without
the records that repeat eval or test and prints its digest for the manifest.
Exit 0 no leakage over data_checks.tolerance (duplicates it allows are
warnings), 1 more duplicates than it allows (by default an exact duplicate
between train and test, or any duplicate of a sealed split), 2 unusable
input.
"""

CHECK_EXAMPLES = """\
examples:
  ftmanifest data check exp.yaml
  ftmanifest data check exp.yaml --near-threshold 0.9 --field prompt --examples 3
  ftmanifest data check exp.yaml --write-clean data/train-clean.jsonl
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "data",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check the manifest's data splits for leakage, or look at a sample",
    )
    actions = p.add_subparsers(
        dest="action", metavar="ACTION", parser_class=type(p), help="what to check"
    )
    actions.required = True
    q = actions.add_parser("check", help="exact and near duplicates between and within splits",
                           description=CHECK_DESCRIPTION,
                           epilog=CHECK_EPILOG + "\n" + CHECK_EXAMPLES)  # fmt: skip
    add_manifest_argument(q)
    q.add_argument("--near-threshold", type=float, default=None, metavar="J",
                   help="Jaccard similarity of 3-word shingles from which two records are "
                   "near duplicates (default: data_checks.near_threshold, 0.8)")  # fmt: skip
    q.add_argument("--field", action="append", default=[], metavar="NAME",
                   help="a record's text is this key or column (repeatable; default: "
                   "data_checks.text_fields, else messages[].content, else "
                   "prompt+completion, else text, else every string)")  # fmt: skip
    q.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="processes that read and sign records (default: every core, one "
                   "for inputs under 8 MiB; 0: every core); the same result for any N")  # fmt: skip
    add_distributed_arguments(
        q,
        "the ranks share the records of each split, rank 0 judges and reports, every rank "
        "exits with its code",
    )
    q.add_argument("--examples", type=int, default=5, metavar="N",
                   help="worst examples shown per split pair")  # fmt: skip
    q.add_argument("--write-clean", type=Path, metavar="OUT",
                   help="write the training file without records that repeat eval or "
                   "test")  # fmt: skip
    q.add_argument("--allow-outside", action="store_true",
                   help="allow data paths outside the manifest's "
                        "repository (or folder)")  # fmt: skip
    add_format_argument(q)
    q.set_defaults(func=run)

    add_nested(actions, "data")


def run(args: argparse.Namespace) -> int:
    near = args.near_threshold
    if near is not None and not 0 < near <= 1 or args.examples < 0:
        raise UsageError(
            "--near-threshold must be in (0, 1] and --examples >= 0",
            field="--near-threshold",
            expected="0 < J <= 1",
            observed=str(near),
            hint="e.g. --near-threshold 0.8",
        )
    if args.jobs is not None and args.jobs < 0:
        raise UsageError(
            "--jobs must be 0 (every core) or more",
            field="--jobs",
            expected="N >= 0",
            observed=str(args.jobs),
            hint="e.g. --jobs 2",
        )
    if getattr(args, "distributed", False):
        return _run_distributed(args)

    no_rank_timeout(args.rank_timeout, "data check M")
    return _check(args)


def _check(args: argparse.Namespace, signer: Any = None) -> int:
    """The check (every rank's share of the signing comes through ``signer``)."""

    with Progress(label="data check", unit="records") as bar:
        result = check_data(args.manifest, threshold=args.near_threshold, fields=args.field,
                            examples=args.examples, jobs=args.jobs,
                            write_clean_to=args.write_clean, allow_outside=args.allow_outside,
                            signer=signer, progress=bar if signer is None else None)  # fmt: skip
    clean = result.clean.to_dict() if result.clean is not None else None
    if args.format == "json":
        payload = _payload(result.leakage, clean)
        payload.update(_summary_payload(result.summary))
        payload["ok"] = result.ok
        sys.stdout.write(to_json(payload))
    else:
        sys.stdout.write(_text(result.leakage, clean) + _summary_text(result.summary))
    return 0 if result.ok else 1


CHECK_ARGUMENTS = ("threshold", "field", "allow_outside", "write_clean")
"""data check's arguments that decide its verdict: the same on every rank."""


def _run_distributed(args: argparse.Namespace) -> int:
    """``--distributed``: every rank signs its share of the records; rank 0 checks."""

    job, timeout = launched(args.rank_timeout, f"data check {args.manifest}")
    share = max(1, parallel.cores() // max(1, job.local_world_size))
    jobs = share if args.jobs is None else args.jobs or parallel.cores()
    with joined(job, timeout) as comm, parallel.Workers(jobs) as workers:
        try:  # the same verdict's arguments, and every node's copy its pin, before any read
            agree_arguments(comm, deciding(args, CHECK_ARGUMENTS))
            _copies_agree(args, comm)
        except FtManifestError as exc:
            print_error(exc, getattr(args, "format", "text"))
            return leave_together(comm, exc.exit_code)
        signer = ranks.RankSigner(comm, workers)
        if job.rank == 0:
            code, error = ranks.run_ranks(comm, lambda: _check(args, signer))
        else:
            code, error = ranks.run_ranks(comm, lambda: _serve(args, comm, signer))
    if job.rank == 0:
        if error is not None:
            raise error
        return code
    own = f"; this rank: {escape(str(error))}" if error is not None else ""
    note(f"rank {job.rank}: signed its share of the records, exit {code} as rank 0 "
         f"(rank 0 prints the report){own}")  # fmt: skip
    return code


def _copies_agree(args: argparse.Namespace, comm: Any) -> None:
    """Every rank hashes the data entries as its node sees them (the files split over
    the node's ranks, ``shard.hash_files``), and the ranks compare them with the pins:
    a node whose copy differs refuses the check on every rank, naming the node."""
    from functools import partial

    planned = shard.Planned()
    seen: dict[str, str] = {}
    pinned: dict[str, str | None] = {}
    manifest = None
    try:
        manifest = load_manifest(args.manifest).manifest
        kw = {"use_cache": False, "allow_outside": args.allow_outside}
        observe_data(manifest, args.manifest.parent, hasher=planned, **kw)
    except FtManifestError as exc:  # still take part in the hashing, then differ
        seen["manifest"] = f"unreadable: {exc.message}"
    planned.run(partial(shard.hash_files, comm))
    if manifest is not None:
        kw = {"use_cache": True, "allow_outside": args.allow_outside}
        states = observe_data(manifest, args.manifest.parent, hasher=planned, **kw)
        for i, (entry, state) in enumerate(zip(manifest.data, states, strict=True)):
            name = f"data[{i}].digest"
            seen[name] = (
                (state.digest or "absent") if state.error is None else f"unreadable: {state.error}"
            )
            pinned[name] = entry.digest
    agree_on_copies(comm, seen, pinned, "data check")


def _serve(args: argparse.Namespace, comm: Any, signer: Any) -> None:
    """A rank other than 0: the same splits as rank 0, its share of each signed."""

    serve_data(args.manifest, comm, signer, fields=args.field, allow_outside=args.allow_outside)


def _payload(report: Any, clean: dict[str, Any] | None) -> dict[str, Any]:
    def ref(r: Any) -> dict[str, Any]:
        text = report.excerpts.get((r.split, r.record))
        out = {"split": r.split, "record": r.record, "line": r.line, "text": text}
        return {**out, "shard": r.shard} if r.shard else out

    pairs = [
        {
            "a": p.a,
            "b": p.b,
            "exact": p.exact,
            "near": p.near,
            "near_complete": p.complete,
            "tolerance": {"field": f"data_checks.tolerance.{p.tolerance}", **p.allowed},
            "refused": [
                {
                    "field": r.field,
                    "kind": r.kind,
                    "count": r.count,
                    "allowed": r.allowed,
                    "floor": r.floor,
                }
                for r in p.breaches
            ],  # fmt: skip
            "severity": _severity(p),
            "examples": [
                {"kind": m.kind, "similarity": m.similarity, "a": ref(m.a), "b": ref(m.b)}
                for m in p.examples
            ],
        }
        for p in report.pairs
    ]
    leaking = {k: len(v) for k, v in report.leaking.items()}
    return {"ok": report.ok, "threshold": report.threshold,
            "threshold_source": report.threshold_source, "lsh_recall": report.recall,
            "records": report.records,
            "records_without_text": report.without_text,
            "pairs": pairs, "leaking_train_records": leaking, "clean": clean}  # fmt: skip


def _severity(p: Any) -> str:
    """error: refused; warning: duplicates allowed, or a near count that is a floor."""
    if p.refused:
        return "error"
    return "warning" if p.exact + p.near or not p.complete else "ok"


def _shown(report: Any, r: Any) -> str:
    text = report.excerpts.get((r.split, r.record), "")
    cut = escape(text[:SHOWN]) + ("..." if len(text) > SHOWN else "")
    shard = f"/{escape(r.shard)}" if r.shard else ""
    return f"{escape(r.split)}{shard}:{r.line}  {cut}"


def _text(report: Any, clean: dict[str, Any] | None) -> str:

    if not report.pairs:
        return "nothing to compare: no data entry has role train, eval, baseline-eval or test\n"
    rows, notes = [], []
    for p in report.pairs:
        pair = f"{p.b} (itself)" if p.a == p.b else f"{p.b} vs {p.a}"
        verdict = {"error": "REFUSED"}.get(_severity(p), _severity(p))
        rows.append((escape(pair), p.exact, p.near if p.complete else f"{p.near}+", verdict))
        notes.append([(f"{m.kind} {m.similarity:.2f}", f"{_shown(report, m.a)}  <->  "
                       f"{_shown(report, m.b)}") for m in p.examples])  # fmt: skip
    out = table(rows, ("split pair", "exact", "near", "result"), notes=notes, nowrap=(1, 2, 3))
    sizes = ", ".join(f"{escape(k)} {v}" for k, v in report.records.items())
    out += f"\nrecords: {sizes}; near duplicates: Jaccard >= {report.threshold:g}"
    out += f" ({report.threshold_source}; LSH recall there {report.recall:.4f})\n"
    floors = [p for p in report.pairs if not p.complete]
    if floors:
        names = ", ".join(
            escape(f"within {p.a}" if p.a == p.b else f"{p.b} vs {p.a}") for p in floors
        )
        out += (f"near counts marked + are a floor ({names}): the search stopped at its bound "
                f"of {report.max_pairs:,} candidate pairs (records alike, e.g. one template); more "
                "near duplicates may be there\n")  # fmt: skip
    if any(report.without_text.values()):
        empty = ", ".join(f"{escape(k)} {v}" for k, v in report.without_text.items() if v)
        out += f"records without text (not compared): {empty}\n"
    if clean is not None:
        out += f"clean copy: {escape(clean['path'])} ({clean['dropped']} records dropped)\n"
        out += f"  digest: {clean['digest']}  (the training entry's new digest)\n"
    if report.ok:
        return out + "OK: no leakage over data_checks.tolerance\n"
    train_side = False
    for p in report.pairs:
        pair = f"within {p.a}" if p.a == p.b else f"{p.b} vs {p.a}"
        train_side |= bool(p.breaches) and p.a != p.b and "train" in p.tolerance
        for r in p.breaches:
            count = f"at least {r.count}" if r.floor else str(r.count)
            out += (f"REFUSED: {escape(pair)}: {count} {r.kind} duplicate(s), {r.allowed} "
                    f"allowed by {r.field}\n")  # fmt: skip
            if r.floor:
                out += ("  the near search stopped at its bound of candidate pairs (records "
                        "alike, e.g. one template); it cannot show the pair within\n")  # fmt: skip
    fix = (
        "drop the training records that repeat eval or test (--write-clean OUT) and re-lock"
        if train_side
        else "remove the repeats from the eval or test split and re-lock"
    )
    return out + f"  fix: {fix}, or raise the manifest field named above\n"


def _summary_payload(s: Any) -> dict[str, Any]:
    categories = {
        st.name: {"records": st.records, "unlabelled": st.unlabelled, "counts": dict(st.categories)}
        for st in s.stats
    }
    for im in s.images.splits:
        categories[im.name] = {"records": sum(c.files for c in im.classes.values()) + im.bad,
                               "unlabelled": 0,
                               "counts": {k: c.files for k, c in im.classes.items()}}  # fmt: skip
    lengths = {
        st.name: {
            "chars": st.chars.summary(),
            "over_seq_len": st.over if st.tokens else None,
            "tokens": st.tokens.summary() if st.tokens else None,
            "longest": [
                {"line": line, "tokens": n, **({"shard": shard} if shard else {})}
                for n, line, shard in st.worst
            ],
        }
        for st in s.stats
    }
    images = {
        im.name: {
            k: {
                "files": c.files,
                "width": c.widths.summary(),
                "height": c.heights.summary(),
                "modes": dict(c.modes),
                "formats": dict(c.formats),
            }
            for k, c in im.classes.items()
        }
        for im in s.images.splits
    }
    return {
        "checks_ok": s.ok,
        "categories": categories,
        "min_per_category": {k: {"n": n, "rule": r} for k, (n, r) in s.minimums.items()},
        "lengths": lengths,
        "seq_len": s.seq_len,
        "tokenizer": {"loaded": s.tokens, "source": s.tokenizer},
        "images": images,
        "findings": [f.to_dict() for f in s.findings],
    }


def _summary_text(s: Any) -> str:

    out = ""
    labelled = [st for st in s.stats if st.categories]
    names = [st.name for st in labelled] + [im.name for im in s.images.splits if im.classes]
    if names:
        counts = {st.name: st.categories for st in labelled}
        counts.update({im.name: {k: c.files for k, c in im.classes.items()}
                       for im in s.images.splits if im.classes})  # fmt: skip
        total: dict[str, int] = {}
        for per in counts.values():
            for k, n in per.items():
                total[k] = total.get(k, 0) + n
        cats = sorted(total, key=lambda k: (-total[k], k))
        rows = [[escape(k)] + [counts[n].get(k, 0) for n in names] for k in cats[:CATEGORY_ROWS]]
        out += "\ncategories (examples per split)\n"
        out += table(rows, ["category", *map(escape, names)], nowrap=range(1, len(names) + 1))
        if len(cats) > CATEGORY_ROWS:
            out += f"... and {len(cats) - CATEGORY_ROWS} more categories (--format json has all)\n"
        mins = ", ".join(f"{escape(k)} {n} ({r})" for k, (n, r) in s.minimums.items())
        out += f"fewest examples per category: {mins}\n" if mins else ""
    if s.stats:
        rows = []
        for st in s.stats:
            c = st.chars.summary()
            t = st.tokens.summary() if st.tokens else None
            over = "-" if not st.tokens or s.seq_len is None else st.over
            rows.append([escape(st.name), st.records, _spread(c), _spread(t) if t else "-", over])
        out += "\nlengths (min / median / p90 / p99 / max)\n"
        out += table(rows, ["split", "records", "characters", "tokens",
                            f"over seq_len {s.seq_len}" if s.seq_len else "over seq_len"],
                     nowrap=(1, 2, 3, 4))  # fmt: skip
        if not s.tokens:
            out += f"tokens not counted: {escape(s.tokenizer)}\n"
    if s.images.splits:
        rows = [
            [escape(im.name), escape(k), c.files, _spread(c.widths.summary(), 3),
             _spread(c.heights.summary(), 3),
             ", ".join(f"{escape(m)} {n}" for m, n in c.modes.most_common())]
            for im in s.images.splits for k, c in sorted(im.classes.items())
        ]  # fmt: skip
        out += "\nimages (width and height: min / median / max)\n"
        out += table(rows, ["split", "class", "files", "width", "height", "modes"])
    if s.findings:
        rows = [[f.severity, escape(f.rule), escape(f.message)] for f in s.findings]
        notes = [[("field", escape(f.field or "")), ("expected", escape(f.expected or "")),
                  ("observed", escape(f.observed or "")), ("fix", escape(f.hint or ""))]
                 for f in s.findings]  # fmt: skip
        out += "\nfindings\n" + table(rows, ["severity", "rule", "what"], notes=notes)
    if s.ok:
        return out + "OK: statistics, images, counts and digests hold no error\n"
    return out + "REFUSED: the findings above hold errors\n"


def _spread(summary: dict[str, int | None], parts: int = 5) -> str:
    keys = ("min", "p50", "p90", "p99", "max") if parts == 5 else ("min", "p50", "max")
    return " / ".join("-" if summary[k] is None else str(summary[k]) for k in keys)
