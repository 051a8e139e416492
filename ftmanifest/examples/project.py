"""The tiny example as a training project: data, model, lock file and manifest.

Layer: commands - examples (demo and test support; not imported by the tool's commands).
``build_example`` writes a folder that ``ftmanifest lock`` can pin: the data
set and model from ``ftmanifest.examples.tiny``, a pip-style lock of the
packages installed here, and an unlocked manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ftmanifest.examples.tiny import build_dataset, build_model
from ftmanifest.fsutil import atomic_write_text

_MANIFEST = """\
# Tiny offline example: route support documents to one of five departments.
# `ftmanifest lock` fills in the pins (environment, digests, record counts).
ftmanifest: 1

experiment:
  id: {experiment_id}
  task: classification
  hypothesis: >-
    Full fine-tuning of a 2-layer {arch} routes the example documents better
    than the untrained model.
  owner: example@example.org
  guards:
    - kind: per_category
      metric: f1
      split: eval
      max_drop: 0.05

model:
  path: {model_dir}
  license: apache-2.0
  terms_accepted: true

seeds:
  python: {seed}
  numpy: {seed}
  torch: {seed}
  data_order: {seed}
  deterministic: true
  cudnn_benchmark: false

data:
  - name: train
    role: train
    path: {data_dir}/train.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false
  - name: eval
    role: eval
    path: {data_dir}/eval.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false
  - name: test
    role: test
    sealed: true
    path: {data_dir}/test.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false

method:
  kind: full

environment:
  lock:
    path: requirements.lock

security:
  scan:
    on: [verify, audit]

training:
  seq_len: 32
  micro_batch: 4
  grad_accum: 1
  loss_normalization: per-token
  loss_on: completion
  precision: fp32
  max_steps: 3
  optimizer:
    name: adamw_torch
    lr: 0.01
    weight_decay: 0.0
    schedule: linear
    warmup_steps: 0
"""

LOCKED_PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "ftmanifest")


def write_lock_file(path: Path) -> Path:
    """A pip-style lock of the packages the example needs, as installed here."""
    from importlib.metadata import PackageNotFoundError, version

    lines = []
    for name in LOCKED_PACKAGES:
        try:
            lines.append(f"{name}=={version(name)}\n")
        except PackageNotFoundError:
            continue
    atomic_write_text(path, "".join(lines))
    return path


def build_example(
    folder: Path,
    *,
    arch: Literal["llama", "gpt2"] = "llama",
    seed: int = 0,
    experiment_id: str = "docroute-tiny",
) -> Path:
    """Data in ``folder/data``, model in ``folder/model``, and an unlocked manifest.

    Returns the manifest path (``folder/manifest.yaml``); run ``ftmanifest
    lock`` on it to pin it to this machine.
    """
    folder = Path(folder)
    build_dataset(folder / "data", seed=seed)
    build_model(folder / "model", arch=arch, seed=seed)
    write_lock_file(folder / "requirements.lock")
    manifest = folder / "manifest.yaml"
    atomic_write_text(
        manifest,
        _MANIFEST.format(
            experiment_id=experiment_id, arch=arch, model_dir="model", data_dir="data", seed=seed
        ),  # fmt: skip
    )
    return manifest
