"""``ftmanifest init PATH``: write a commented manifest template.

Layer: edge.  The template is schema-valid but deliberately incomplete, so
``ftmanifest lint`` rejects it (exit 1) until every FILL is done.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ftmanifest.errors import InputError

DESCRIPTION = """\
Write a commented manifest template at PATH.  The template is valid against
the schema but deliberately incomplete: every value still to choose is marked
FILL, so `ftmanifest lint` refuses it (exit 1) until each one is filled in,
and `ftmanifest lock` fills in the digests and versions found here.  An
existing file is replaced only with --force.  Exit 0 written, 2 a path that
cannot be written.
"""

EXAMPLES = """\
examples:
  ftmanifest init exp.yaml
  ftmanifest init exp.yaml --id docroute-lora-r16 --force
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
    p.set_defaults(func=run)


def render_template(experiment_id: str, schema_url: str) -> str:
    from importlib import resources

    text = resources.files("ftmanifest.templates").joinpath("manifest.yaml").read_text("utf-8")
    return text.format(experiment_id=experiment_id, schema_url=schema_url)


def run(args: argparse.Namespace) -> int:
    from ftmanifest.fsutil import atomic_write_text
    from ftmanifest.manifest.schema import SCHEMA_ID

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
    atomic_write_text(path, render_template(exp_id, SCHEMA_ID))
    sys.stderr.write(f"wrote {path}; fill in every FILL, then run `ftmanifest lint {path}`\n")
    return 0
