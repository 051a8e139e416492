"""What each ``--from`` argument is, and the one registry of source readers.

Layer: edges - authoring.  A reader takes the source's path, the manifest's folder
and the draft, and writes what it knows into the draft (``draft.Draft``).
Adding a source kind is one module and one entry in ``READERS``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from ftmanifest.authoring import (
    axolotl,
    data_files,
    llamafactory,
    model_source,
    peft_config,
    trainer_args,
    trl_cli,
)
from ftmanifest.authoring.draft import Draft
from ftmanifest.authoring.formats import read_mapping
from ftmanifest.errors import InputError, InputNotFoundError

_HUB_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[^\s@]+)?$")
_PICKLE_HEADS = (b"\x80", b"PK\x03\x04")  # a pickle protocol 2+ opcode; torch.save's zip


class Reader(Protocol):
    def __call__(self, path: Path, base: Path, draft: Draft, /) -> None: ...


READERS: dict[str, Reader] = {
    "axolotl": axolotl.read,
    "llamafactory": llamafactory.read,
    "trainer-args": trainer_args.read,
    "trl-cli": trl_cli.read,
    "peft": peft_config.read,
    "model": model_source.read_folder,
    "data": data_files.read,
}


def classify(source: str) -> tuple[str, Path]:
    """(kind, path) for one ``--from`` argument; ``hub`` for ``repo@revision``."""
    path = Path(source)
    if not path.exists() and not path.is_symlink():
        if _HUB_REF.match(source):
            return "hub", path
        raise InputNotFoundError(
            "source not found",
            path=source,
            field="--from",
            expected="a config, adapter_config.json, model folder, data file, or org/name@revision",
            observed="no such file or folder",
            hint="check the path; a hub model is written org/name@revision",
        )
    if path.is_dir():
        if (path / "adapter_config.json").is_file():
            return "peft", path / "adapter_config.json"
        if (path / "config.json").is_file():
            return "model", path
        return "data", path
    if path.suffix.lower() in (".bin", ".pt", ".pkl", ".pickle") or _is_pickle(path):
        refuse_pickle(path)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        cfg = read_mapping(path, "training config")
        if axolotl.looks_like(cfg):
            return "axolotl", path
        if llamafactory.looks_like(cfg):
            return "llamafactory", path
        if trl_cli.looks_like(cfg):
            return "trl-cli", path
        raise InputError(
            "a YAML file that is no training config ftmanifest reads",
            path=str(path),
            field="--from",
            expected="an axolotl config (base_model:), a LLaMA-Factory config "
            "(model_name_or_path: with stage:, finetuning_type:, dataset: or template:) or a "
            "TRL CLI config (model_name_or_path: with dataset_name:, datasets: or use_peft:)",
            observed=f"top-level keys {', '.join(sorted(cfg)[:6]) or 'none'}",
            hint="name the training config, or a data file in another format",
        )
    if suffix == ".json" and path.stat().st_size < (16 << 20):
        kind = _json_kind(path)
        if kind is not None:
            return kind, path
    return "data", path


def _json_kind(path: Path) -> str | None:
    try:
        cfg = read_mapping(path, "JSON file")
    except InputError:
        return None  # not one mapping: a data file
    if peft_config.looks_like(cfg):
        return "peft"
    if {"output_dir", "per_device_train_batch_size"} <= cfg.keys():
        return "trainer-args"
    return None


def _is_pickle(path: Path) -> bool:
    if path.name != "training_args.bin":
        return False
    with open(path, "rb") as f:
        return f.read(4).startswith(_PICKLE_HEADS)


def refuse_pickle(path: Path) -> None:
    """Never unpickle: ``training_args.bin`` runs code when loaded."""
    raise InputError(
        "is a pickle (torch.save of the Trainer's arguments): ftmanifest never unpickles it, "
        "since loading a pickle runs the code inside it",
        path=str(path),
        field="--from",
        expected="the arguments as JSON (TrainingArguments.to_json_string())",
        observed=f"a pickled file ({path.name})",
        hint="in the training script: Path('training_args.json').write_text("
        "trainer.args.to_json_string()), then --from training_args.json",
    )


def read_all(sources: list[str], base: Path) -> Draft:
    """Every source read into one draft, in the order given."""
    draft = Draft()
    for source in sources:
        kind, path = classify(source)
        if kind == "hub":
            model_source.read_ref(source, draft)
        else:
            READERS[kind](path, base, draft)
    return draft
