"""``ftmanifest preflight M``: the method's checks on one full step, before renting GPUs.

Layer: commands - edge.  Runs the named checks of ``ftmanifest.preflight.checks`` on the
manifest's model, data and recipe (``--recipe FILE.py:FUNC`` for the training
code's own), prints one row per check with its figures, renders a few
formatted examples token by token (``--out FILE`` writes them as a page), and
records the result in the ledger (``--no-record`` does not).

Exit codes: 0 every check passed, 1 a check failed, 2 unusable input.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.cli._render import marked_tokens
from ftmanifest.errors import UsageError
from ftmanifest.fsutil import atomic_write_text, write_error
from ftmanifest.ledger import open_ledger
from ftmanifest.manifest import LoadedManifest, load_manifest
from ftmanifest.output import table, to_json
from ftmanifest.preflight.checks import Options
from ftmanifest.preflight.run import record, run_preflight, selected, stderr_say
from ftmanifest.probe import probe_all
from ftmanifest.probe.fields import to_environment_fields
from ftmanifest.progress import live
from ftmanifest.safe_text import escape
from ftmanifest.signing.keys import load_private_key
from ftmanifest.verify.environment import from_probe

DESCRIPTION = """\
Run the method's checks on one full training step of the manifest's model,
data and recipe before renting GPUs (stack, disk, tokens, step, update,
overfit, resume, determinism: the first steps twice in fresh processes,
throughput): one row per check with its figures, a few examples formatted
token by token (--out writes them as a page), and the result recorded in
the ledger (unless --no-record).  Exit 0 every check passed, 1 a check
failed, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest preflight exp.yaml
  ftmanifest preflight exp.yaml --only step --device cuda
  ftmanifest preflight exp.yaml --recipe train.py:recipe --out tokens.html
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "preflight",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check and size one full training step on this machine",
    )
    add_manifest_argument(p)
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only this check (repeatable): stack, disk, tokens, step, "
                   "update, overfit, resume, determinism, throughput")  # fmt: skip
    p.add_argument("--recipe", metavar="FILE.py:FUNC",
                   help="the training code's recipe: FUNC(default Recipe) -> Recipe")  # fmt: skip
    p.add_argument(
        "--device",
        default=None,
        help="torch device to run on (cpu, cuda, mps; default: the one "
        "environment.backend.kind names: cuda and rocm run on cuda, mps on mps, else cpu)",
    )
    p.add_argument("--per-category", type=int, default=2, metavar="N",
                   help="formatted examples shown per category")  # fmt: skip
    p.add_argument("--overfit-steps", type=int, default=60, metavar="N",
                   help="step budget of the overfit check")  # fmt: skip
    p.add_argument("--overfit-ratio", type=float, default=0.2, metavar="R",
                   help="the overfit loss must fall below R x its start")  # fmt: skip
    p.add_argument("--overfit-lr", type=float, default=None, metavar="LR",
                   help="learning rate of the overfit check (default: training.optimizer.lr, "
                   "else 0.01)")  # fmt: skip
    p.add_argument("--throughput-seconds", type=float, default=3.0, metavar="S",
                   help="seconds the throughput check trains for, after its two warm-up "
                   "steps")  # fmt: skip
    p.add_argument("--no-repeat", action="store_true",
                   help="determinism: run the first steps in one fresh process, not two, and "
                   "compare nothing (when loading the model twice costs too much)")  # fmt: skip
    p.add_argument("-o", "--out", type=Path, metavar="FILE",
                   help="write the rendered examples here, as one HTML page")  # fmt: skip
    p.add_argument("--allow-outside", action="store_true",
                   help="allow data/model paths outside the manifest's folder")  # fmt: skip
    p.add_argument("--ledger", type=Path, metavar="DIR", help="the ledger folder")
    p.add_argument("--no-record", action="store_true", help="do not record the result")
    p.add_argument("--key", type=Path, metavar="KEY",
                   help="sign the preflight record with this key "
                   "(default: $FTMANIFEST_LEDGER_KEY when set)")  # fmt: skip
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    selected(args.only)  # an unknown name is a usage error before anything loads
    if args.overfit_steps < 1 or not 0 < args.overfit_ratio < 1 or args.per_category < 0:
        raise UsageError("--overfit-steps must be >= 1, --overfit-ratio in (0, 1), "
                         "--per-category >= 0", field="--overfit-ratio")  # fmt: skip
    if args.overfit_lr is not None and not 0 < args.overfit_lr < 10:
        raise UsageError("--overfit-lr must be a learning rate in (0, 10)", field="--overfit-lr",
                         expected="a number in (0, 10), such as 0.01",
                         observed=str(args.overfit_lr),
                         hint="omit it to use training.optimizer.lr, else 0.01")  # fmt: skip
    if not 0 < args.throughput_seconds <= 3600:
        raise UsageError("--throughput-seconds must be in (0, 3600]",
                         field="--throughput-seconds", expected="seconds in (0, 3600], such as 3",
                         observed=str(args.throughput_seconds),
                         hint="omit it to measure for 3 s")  # fmt: skip
    loaded = load_manifest(args.manifest)
    options = Options(
        device=args.device or device_for(loaded.manifest.environment.backend.kind),
        per_category=args.per_category,
        overfit_steps=args.overfit_steps,
        overfit_ratio=args.overfit_ratio,
        overfit_lr=args.overfit_lr,
        throughput_seconds=args.throughput_seconds,
        repeat=not args.no_repeat,
    )
    result = run_preflight(loaded, only=args.only, options=options, recipe_spec=args.recipe,
                           allow_outside=args.allow_outside, say=stderr_say)  # fmt: skip
    if live(sys.stderr):
        sys.stderr.write("\r\x1b[K")
    where = None if args.no_record else _record(loaded, result, args)
    if args.out is not None:
        _write_html(args.out, result)
    if args.format == "json":
        sys.stdout.write(to_json({"ok": result.ok, "recipe": result.recipe_source,
                                  "seconds": result.seconds, "record": where,
                                  "rows": [r.to_dict() for r in result.rows]}))  # fmt: skip
        return 0 if result.ok else 1
    sys.stdout.write(_text(result))
    if where:
        sys.stdout.write(f"recorded: {escape(where)}\n")
    return 0 if result.ok else 1


def device_for(backend: str | None) -> str:
    """The torch device a manifest's backend runs on (ROCm builds of torch call it cuda)."""
    return {"cuda": "cuda", "rocm": "cuda", "mps": "mps"}.get(str(backend or ""), "cpu")


def _record(loaded: LoadedManifest, result: Any, args: argparse.Namespace) -> str | None:

    probed = probe_all(Path(loaded.path).parent)
    env = from_probe(to_environment_fields(probed, packages=loaded.manifest.environment.packages))
    store = open_ledger(Path(loaded.path), args.ledger)
    key = None
    if args.key is not None:
        key = load_private_key(args.key)
    try:
        return str(store.append(record(loaded, result, env), key=key).file)
    except OSError as exc:
        raise write_error(exc, store.root, "cannot record the preflight result") from None


def _text(result: Any) -> str:

    rows = [(r.name, "pass" if r.ok else "FAIL", r.summary) for r in result.rows]
    notes = [[("note", d) for d in r.details if d != r.summary] for r in result.rows]
    out = table(rows, ("check", "result", "figures"), notes=notes, nowrap=(0, 1))
    tokens = next((r for r in result.rows if r.name == "tokens"), None)
    rendered = tokens.figures.get("rendered", []) if tokens is not None else []
    for ex in rendered:
        out += f"\nline {ex['line']} ({escape(str(ex['category']))}):\n  {marked_tokens(ex)}\n"
    if rendered:
        out += "  ([x] carries loss, <x> special token, | prompt ends)\n"
    verdict = "OK: every check passed" if result.ok else "REFUSED: fix the failed rows"
    return out + f"\n{verdict} ({result.seconds:.1f} s, recipe: {result.recipe_source})\n"


def _write_html(path: Path, result: Any) -> None:

    tokens = next((r for r in result.rows if r.name == "tokens"), None)
    body = []
    for ex in tokens.figures.get("rendered", []) if tokens else []:
        spans = []
        for t in ex["tokens"]:
            cls = " ".join(c for c in ("loss" if t["loss"] else "", "special" if t["special"]
                                       else "", "prompt" if t["prompt"] else "") if c)  # fmt: skip
            spans.append(f'<span class="{cls}" title="id {t["id"]}">'
                         f"{html.escape(escape(str(t['token'])))}</span>")  # fmt: skip
        head = html.escape(f"line {ex['line']} ({ex['category']})")
        body.append(f"<h2>{head}</h2><p>{' '.join(spans)}</p>")
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\"><title>preflight: formatted examples</title><style>"
        "body{font-family:sans-serif;margin:2em}span{font-family:monospace;padding:1px 2px;"
        "margin:1px;border-radius:3px;display:inline-block}.prompt{background:#eef}"
        ".loss{background:#cfc;font-weight:bold}.special{color:#a00}</style></head><body>"
        "<h1>Formatted examples</h1><p>green: carries loss; blue: prompt; red: special "
        "token</p>" + "".join(body) + "</body></html>\n"
    )
    atomic_write_text(path, page)
