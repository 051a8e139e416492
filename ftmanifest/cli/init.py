"""``ftmanifest init PATH [--from SOURCE...]``: write a commented manifest to fill in.

Layer: commands - edge.  The template is schema-valid but deliberately incomplete, so
``ftmanifest lint`` rejects it (exit 1) until every FILL is done.  With
``--from``, ``ftmanifest.authoring`` derives what the sources state (each
value commented with its file and key) and leaves the judgement as FILLs.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ftmanifest.authoring.compose import author
from ftmanifest.authoring.lockfile import lock_file
from ftmanifest.authoring.schema_ref import schema_ref as reference
from ftmanifest.errors import InputError
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.location import format_loc
from ftmanifest.manifest.fills import fills_in
from ftmanifest.output import note, to_json
from ftmanifest.safe_text import escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ftmanifest.authoring.draft import Derived

DESCRIPTION = """\
Write a commented manifest template at PATH.  The template is valid against
the schema but deliberately incomplete: every value still to choose is marked
FILL, so `ftmanifest lint` refuses it (exit 1) until each one is filled in,
and `ftmanifest lock` fills in the digests and versions found here.  An
existing file is replaced only with --force.
--from SOURCE... derives what your files already say: an axolotl,
LLaMA-Factory or TRL CLI (trl sft --config) config, a TrainingArguments /
SFTConfig / DPOConfig JSON (trainer.args.to_json_string(); a pickled
training_args.bin is refused), a peft adapter_config.json, a model folder or
org/name@revision in the Hugging Face cache, and data files or folders.  Each
derived value is commented with its source file and key, a key the config
leaves out with the tool's documented default it runs with.  What ftmanifest
did not derive is a FILL, left null (never a plausible value): judgement
(hypothesis, guards, licences, roles, the sealed split, personal data,
retention) and what the config leaves to the machine or the run.  Lint refuses
a value still marked FILL.  A key ftmanifest does not read is named in a note.
--format json prints what was derived and the FILLs.  Exit 0 written, 2 a
source or path that cannot be used (nothing is written).
"""

EXAMPLES = """\
examples:
  ftmanifest init exp.yaml
  ftmanifest init exp.yaml --id docroute-lora-r16 --force
  ftmanifest init exp.yaml --from axolotl.yml data/test.jsonl
  ftmanifest init exp.yaml --from args.json out/ org/model@main data/ --format json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "init",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="write a commented manifest template to fill in",
    )
    p.add_argument("path", type=Path, metavar="PATH", help="the manifest file to create")
    p.add_argument(
        "--id",
        dest="experiment_id",
        metavar="ID",
        help="experiment id (default: the file name without suffix)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument(
        "--from",
        dest="sources",
        nargs="+",
        metavar="SOURCE",
        default=[],
        help="configs, adapter_config.json, model folder or org/name@revision, data files",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format; json: what was derived (field, value, source) and the FILLs",
    )
    p.set_defaults(func=run)


def render_template(experiment_id: str, schema_url: str, manifest: Path) -> str:
    from importlib import resources

    lock_path, lock_shown = lock_file(manifest)
    text = resources.files("ftmanifest.templates").joinpath("manifest.yaml").read_text("utf-8")
    return text.format(
        experiment_id=experiment_id, schema_url=schema_url, lock_path=lock_path,
        lock_shown=lock_shown,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:

    path: Path = args.path
    exp_id = args.experiment_id or re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$", exp_id or ""):
        raise InputError(
            "experiment id is not usable",
            field="experiment.id",
            expected="letters, digits, '.', '_', '-'",
            observed=exp_id,
            hint="pass --id NAME",
        )
    if path.is_dir():
        raise InputError(
            "is a directory; init writes a manifest file",
            path=str(path),
            expected="the path of a new .yaml file",
            hint=f"ftmanifest init {path / (path.resolve().name + '.yaml')}",
        )
    if path.exists() and not args.force:
        raise InputError(
            "file exists; not overwriting it",
            path=str(path),
            hint="choose another PATH or pass --force",
        )
    if not path.parent.is_dir():
        raise InputError(
            "folder does not exist", path=str(path.parent), hint=f"mkdir -p {path.parent}"
        )
    schema = schema_ref(path)
    if args.sources:
        authored = author(args.sources, path, exp_id, schema)
        text, derived, fills = authored.text, authored.derived, authored.fills
        notes = authored.notes
    else:
        text, derived, notes = render_template(exp_id, schema, path), [], []
        fills = fills_in(text)
    atomic_write_text(path, text)
    for line in notes:
        note(f"note: {escape(line)}")
    if args.format == "json":
        sys.stdout.write(to_json(_payload(path, derived, fills, notes)) + "\n")
    note(
        f"wrote {path} ({len(derived)} derived, {len(fills)} to FILL); fill in every FILL, "
        f"then run `ftmanifest lock {path}` and `ftmanifest lint {path}`"
    )
    return 0


def schema_ref(manifest: Path) -> str:
    """A committed copy of the schema relative to the manifest, or its published id."""

    return reference(manifest)


def _payload(
    path: Path, derived: list[Derived], fills: list[tuple[str, str]], notes: list[str]
) -> dict[str, object]:

    return {
        "manifest": str(path),
        "derived": [
            {"field": format_loc(d.loc), "value": d.value, "source": d.source, "key": d.key}
            for d in derived
        ],
        "fill": [{"field": f, "decide": why} for f, why in fills],
        "notes": notes,
    }
