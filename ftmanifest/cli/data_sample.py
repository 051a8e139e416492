"""``ftmanifest data sample M --per-category N``: a look at the examples.

Layer: commands - edge (parsing and printing; the payload shown is
``ftmanifest.data.sample_payload``, choosing and rendering
``ftmanifest.data.sample``).  Shows ``N`` seeded records of every category
of every train/eval/test/baseline-eval split (``--split`` to pick), each as
preflight formats it with the pinned tokenizer: the text the model reads,
its tokens with the ones that carry loss marked, the cut at
``training.seq_len``, and the expected target beside it.  Without the
tokenizer the first line says so and the raw fields are shown.  ``--out
OUT`` writes the same as one self-contained page; ``--format json`` prints
it as data.

Exit codes: 0 shown; 1 a chosen record cannot be formatted (preflight and
the default recipe would fail on it too); 2 unusable input.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.cli._render import marked_tokens
from ftmanifest.data.sample import NO_CATEGORY
from ftmanifest.data.sample_payload import refuse_output, sample_payload
from ftmanifest.data.sample_run import from_run
from ftmanifest.errors import UsageError
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.manifest import load_manifest
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape

MAX_PER_CATEGORY = 1000
SAMPLE_EPILOG = """\
Which records: per split and category (data_checks.label; default label, else
category; records without one under "(no category)"), the N lowest keyed hashes
of (seed, split, record number): the same seed shows the same records, and other
splits or categories do not change them.  How: preflight's formatting with the pinned
tokenizer (model.path or the hub cache, never downloaded; each tokenizer file
pinned in model.files must match): the chat template or prompt+completion, cut
at training.seq_len, [x] the tokens that carry loss (training.loss_on).  The
expected output beside it: data_checks.target, else completion, else the last
assistant message, else the label.
Exit codes: 0 shown (also when the tokenizer is not here: the first line says
so and raw fields follow); 1 a chosen record cannot be formatted; 2 bad input.
"""


SAMPLE_DESCRIPTION = """\
A look at the examples: N seeded records of every category of every train,
eval, baseline-eval and test split (--split to pick), each as preflight
formats it with the pinned tokenizer: the text the model reads, its tokens
with the ones that carry loss marked, the cut at training.seq_len, and the
expected target beside it.  --out OUT writes the same as one page.
"""

SAMPLE_EXAMPLES = """\
examples:
  ftmanifest data sample exp.yaml --per-category 2
  ftmanifest data sample exp.yaml --split eval --per-category 1 --out sample.html
  ftmanifest data sample exp.yaml --from-run out/ftmanifest-run.json
"""


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    q = actions.add_parser("sample", help="a few records of every category, as the model sees them",
                           description=SAMPLE_DESCRIPTION,
                           epilog=SAMPLE_EPILOG + "\n" + SAMPLE_EXAMPLES)  # fmt: skip
    add_manifest_argument(q)
    q.add_argument(
        "--per-category",
        type=int,
        metavar="N",
        help="records shown per category and split (required without --from-run)",
    )
    q.add_argument("--from-run", metavar="RUN",
                   help="show the examples as the trainer itself fed them: the batches the "
                   "Trainer guard recorded in RUN (a run record file, ftmanifest-run.json, or "
                   "an attempt id the ledger knows)")  # fmt: skip
    q.add_argument("--split", action="append", default=[], metavar="NAME",
                   help="only this data entry (repeatable; default: every train, eval, "
                   "baseline-eval and test split)")  # fmt: skip
    q.add_argument("--seed", type=int, metavar="S",
                   help="choose with this seed (default: the manifest's seeds.data_order, "
                   "else seeds.python, seeds.torch, seeds.numpy, else 0)")  # fmt: skip
    q.add_argument("-o", "--out", type=Path, metavar="OUT",
                   help="also write the sample as one self-contained HTML page")  # fmt: skip
    q.add_argument("--allow-outside", action="store_true",
                   help="allow data/model paths outside the manifest's "
                        "repository (or folder)")  # fmt: skip
    add_format_argument(q)
    q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.from_run is not None:
        return _from_run(args)
    if args.per_category is None:
        raise UsageError(
            "--per-category N is required (or --from-run RUN)",
            field="--per-category",
            expected="--per-category N, or --from-run RUN for the trainer's own batches",
            observed="neither",
            hint="e.g. --per-category 3",
        )
    if not 1 <= args.per_category <= MAX_PER_CATEGORY or (args.seed is not None and args.seed < 0):
        raise UsageError(
            f"--per-category must be 1 to {MAX_PER_CATEGORY} and --seed >= 0",
            field="--per-category" if args.seed is None or args.seed >= 0 else "--seed",
            expected=f"1 <= N <= {MAX_PER_CATEGORY}, S >= 0",
            observed=f"N={args.per_category}, S={args.seed}",
            hint="e.g. --per-category 3",
        )
    loaded = load_manifest(args.manifest)
    payload = sample_payload(loaded, per_category=args.per_category, splits=args.split,
                             seed=args.seed, allow_outside=args.allow_outside)  # fmt: skip
    if args.out is not None:
        refuse_output(args.out, loaded, payload, "--out")
        atomic_write_text(args.out, page(payload))
    if args.format == "json":
        sys.stdout.write(to_json(payload))
    else:
        sys.stdout.write(text(payload))
        if args.out is not None:
            sys.stdout.write(f"written: {escape(str(args.out))}\n")
    return 0 if payload["ok"] else 1


def _from_run(args: argparse.Namespace) -> int:

    payload = from_run(Path(args.manifest), args.from_run)
    if args.format == "json":
        sys.stdout.write(to_json(payload))
    else:
        sys.stdout.write(run_text(payload))
    return 0


def run_text(payload: dict[str, Any]) -> str:
    """The recorded rows: token and loss counts, the redacted text with [[the loss]] marked."""
    lines = [f"from the trainer's own batches ({escape(payload['from_run'])}): "
             f"{escape(str(payload['arguments']))}, {escape(str(payload['kind']))}"]  # fmt: skip
    for b in payload["micro_batches"]:
        shapes = ", ".join(f"{k} {v.get('shape')}" for k, v in b["tensors"].items())
        lines += ["", f"== micro-batch {b['index']}: {escape(shapes)} =="]
        if b["why_not"]:
            lines.append(f"  {escape(b['why_not'])}")
        for ex in b["examples"]:
            pair = f" ({ex['pair']})" if ex["pair"] else ""
            loss = "?" if ex["loss_tokens"] is None else ex["loss_tokens"]
            head = f"  row {ex['row']}{pair}: {ex['tokens']} tokens, loss on {loss}"
            if ex["redacted"]:
                head += f", {ex['redacted']} span(s) redacted"
            if ex["cut"] or ex["text_cut"]:
                head += " (shown cut)"
            lines.append(head)
            shown = ex["marked"] if ex["marked"] is not None else ex["text"]
            lines.append(f"    {_q(shown) if shown is not None else '(no text recorded)'}")
    lines += ["", "[[...]]: the tokens that carry loss (the recorded loss mask)"]
    return "\n".join(lines) + "\n"


def _q(value: str) -> str:
    return '"' + escape(value) + '"'


def _category(cat: str | None) -> str:

    return NO_CATEGORY if cat is None else escape(cat)


def _header(payload: dict[str, Any]) -> list[str]:
    tok = payload["tokenizer"]
    way = payload["computed_by"]
    lines = [escape(way["says"])]
    if way["way"] is None:
        lines.append("NOT RENDERED: the records' raw fields follow, NOT what the model sees")
    elif not payload["rendered"]:
        lines.append(
            "NOT RENDERED: the pinned tokenizer is not available offline ("
            f"{escape(str(tok['reason']))}); the records' raw fields follow, NOT what the "
            "model sees"
        )
    else:
        how = (
            "its chat template" if tok["chat_template"] else "no chat template (prompt+completion)"
        )
        lines.append(
            f"rendered with tokenizer {escape(str(tok['folder']))} and "
            f"{how}, cut at seq_len {payload['seq_len']} ({payload['seq_len_from']}), loss on "
            f"{escape(payload['loss_on'])}"
        )
    lines.append(
        f"{payload['per_category']} per category, seed {payload['seed']} "
        f"({escape(payload['seed_from'])})"
    )
    return lines


def _cut(r: dict[str, Any], seq_len: int) -> str | None:
    if not r["truncated"]:
        return None
    lost = r["completion_tokens"] - max(0, r["kept_tokens"] - r["prompt_tokens"])
    if r["target_lost"]:
        what = "the target is cut off entirely"
    elif r["target_cut"]:
        what = f"the target loses {lost} of its {r['completion_tokens']} tokens"
    else:
        what = "the target is whole"
    return f"TRUNCATED at seq_len {seq_len}: {r['token_count']} tokens; {what}"


def text(payload: dict[str, Any]) -> str:
    lines = _header(payload)
    for sp in payload["splits"]:
        lines += ["", f"== {escape(sp['name'])} ({sp['role']}): {sp['records']} records, "
                  f"{len(sp['categories'])} categories =="]  # fmt: skip
        for c in sp["categories"]:
            shown = len(c["examples"])
            lines.append(f"-- {_category(c['category'])}: {c['records']} records, {shown} shown --")
            for ex in c["examples"]:
                t = ex["target"]
                lines.append(f"  record {ex['record']} (line {ex['line']})")
                r = ex["rendered"]
                if ex["error"]:
                    lines.append(f"    CANNOT FORMAT: {escape(ex['error'])}")
                if r is not None:
                    lines.append(f"    input:    {_q(r['prompt_text'])}")
                    lines.append(f"    output:   {_q(r['completion_text'])}")
                    lines.append(f"    expected: {_q(t['text'])}  ({escape(t['field'] or '-')})")
                    lines.append(f"    loss on {r['loss_tokens']} of {r['kept_tokens']} tokens: "
                                 f"{_q(r['loss_text'])}")  # fmt: skip
                    lines.append(f"    tokens:   {marked_tokens(r)}")
                    cut = _cut(r, payload["seq_len"])
                    if cut:
                        lines.append(f"    {cut}")
                else:
                    for name, value in ex["raw"]:
                        lines.append(f"    {escape(name)}: {_q(value)}")
                    lines.append(f"    expected: {_q(t['text'])}  ({escape(t['field'] or '-')})")
    if payload["skipped"]:
        lines += ["", "not shown (image folders): " + ", ".join(map(escape, payload["skipped"]))]
    if payload["rendered"]:
        lines += ["", "tokens: [x] carries loss, <x> special token, | the prompt ends"]
    if not payload["ok"]:
        lines.append("REFUSED: a chosen record cannot be formatted as training formats it")
    return "\n".join(lines) + "\n"


_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
    "td,th{border:1px solid #ccc;padding:4px;vertical-align:top;text-align:left}"
    "pre{white-space:pre-wrap;margin:0}.tok{font-family:monospace;padding:1px 2px;margin:1px;"
    "border-radius:3px;display:inline-block}.prompt{background:#eef}"
    ".loss{background:#cfc;font-weight:bold}.special{color:#a00}.nl{color:#999}.warn{color:#a00;"
    "font-weight:bold}"
)
_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _h(value: object) -> str:
    return html.escape(escape(str(value)), quote=True)


def _pre(value: str) -> str:
    """``value`` in a <pre>, each line break shown as ``\\n`` before it breaks the line."""
    lines = value.split("\n")
    return "<pre>" + '<span class="nl">\\n</span>\n'.join(_h(x) for x in lines) + "</pre>"


def _tokens_html(r: dict[str, Any]) -> str:
    spans = []
    for t in r["tokens"]:
        cls = " ".join(c for c, on in (("loss", t["loss"]), ("special", t["special"]),
                                       ("prompt", t["prompt"])) if on)  # fmt: skip
        spans.append(f'<span class="tok {cls}" title="id {_h(t["id"])}">{_h(t["token"])}</span>')
    return " ".join(spans)


def _example_html(ex: dict[str, Any], seq_len: int) -> str:
    t = ex["target"]
    expected = f"{_pre(t['text'])}<small>{_h(t['field'] or '-')}</small>"
    head = f"<h4>record {ex['record']} (line {ex['line']})</h4>"
    if ex["error"]:
        head += f'<p class="warn">cannot format: {_h(ex["error"])}</p>'
    r = ex["rendered"]
    if r is None:
        raw = "".join(f"<b>{_h(k)}</b>{_pre(v)}" for k, v in ex["raw"])
        return (f"{head}<table><tr><th>raw fields (not rendered)</th><th>expected</th></tr>"
                f"<tr><td>{raw}</td><td>{expected}</td></tr></table>")  # fmt: skip
    cut = _cut(r, seq_len)
    raw = "".join(f"<b>{_h(k)}</b>{_pre(v)}" for k, v in ex["raw"])
    return (
        f"{head}<table><tr><th>input</th><th>output</th><th>expected</th></tr>"
        f"<tr><td>{_pre(r['prompt_text'])}</td><td>{_pre(r['completion_text'])}"
        f"</td><td>{expected}</td></tr></table><p>{r['loss_tokens']} of "
        f"{r['kept_tokens']} tokens carry loss</p><p>{_tokens_html(r)}</p>"
        + (f'<p class="warn">{_h(cut)}</p>' if cut else "")
        + f"<details><summary>the record's fields</summary>{raw}</details>"
    )


def page(payload: dict[str, Any]) -> str:
    """One self-contained page: no script, no external resource, everything escaped."""
    body = [f"<p{'' if payload['rendered'] else ' class=warn'}>{_h(line)}</p>"
            for line in _header(payload)]  # fmt: skip
    if payload["rendered"]:
        body.append(
            '<p><span class="tok loss">green</span> carries loss, <span class="tok prompt">'
            'blue</span> prompt, <span class="tok special">red</span> special token</p>'
        )
    for sp in payload["splits"]:
        body.append(f"<h2>{_h(sp['name'])} ({_h(sp['role'])}): {sp['records']} records</h2>")
        for c in sp["categories"]:
            body.append(f"<section><h3>{_h(_category(c['category']))}: {c['records']} records"
                        f"</h3>")  # fmt: skip
            body += [_example_html(ex, payload["seq_len"]) for ex in c["examples"]]
            body.append("</section>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>data sample: {_h(Path(payload['manifest']).name)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>data sample</h1>"
        + "".join(body)
        + "</body></html>\n"
    )
