"""Fixtures for the results tests: a complete tiny run folder to audit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git

# a realistic fake GitHub token (the scan tests' constant)
GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class AuditRun:
    """The ``project`` repo, a run folder beside it, and the key that binds its adapter."""

    manifest: Path
    run: Path
    key: Any

    @property
    def adapter(self) -> Path:
        return self.run / "out" / "docroute-lora-r16"

    def relock(self, message: str = "data changed") -> None:
        """Commit a data change, re-lock the manifest, and re-bind the adapter to it;
        the data and the adapter's files get modes within the defaults again."""
        from ftmanifest.adapter.bind import bind_adapter
        from ftmanifest.verify.lock import lock_manifest

        git(self.manifest.parent, "add", "-A")
        git(self.manifest.parent, "commit", "-qm", message, "--allow-empty")
        lock_manifest(self.manifest)
        self.score_baseline()
        bind_adapter(self.adapter, self.manifest, self.key)
        tighten(self.adapter, self.manifest.parent / "data", self.manifest.parent / "model")
        self.compare()

    @property
    def pinned_baseline(self) -> Path:
        """``evaluation.baseline.results``: the baseline's results on the eval split."""
        return self.manifest.parent / "eval" / "baseline.results.json"

    def score_baseline(self) -> None:
        """Score the baseline (account-0 wrong) on the eval split into the pinned
        ``evaluation.baseline.results`` file, commit it and lock its digest."""
        from ftmanifest.cli import main
        from ftmanifest.verify.lock import lock_manifest

        preds = self.manifest.parent / "eval" / "baseline.jsonl"
        write_predictions(preds, _eval_rows({"account-0"}))
        code = main(["score", "--manifest", str(self.manifest), "--split", "eval",
                     "--predictions", str(preds), "--out", str(self.pinned_baseline)])  # fmt: skip
        assert code == 0
        git(self.manifest.parent, "add", "-A")
        git(self.manifest.parent, "commit", "-qm", "baseline results", "--allow-empty")
        lock_manifest(self.manifest)

    def compare(self) -> None:
        """Score a candidate on the eval split under the manifest as it is now, and
        write the record of its comparison with the pinned baseline (a copy in
        ``run/results``) that audit re-judges (``run/comparison.json``)."""
        from ftmanifest.cli import main

        results = self.run / "results"
        results.mkdir(exist_ok=True)
        (results / "baseline.results.json").write_bytes(self.pinned_baseline.read_bytes())
        write_predictions(results / "candidate.jsonl", _eval_rows(set()))
        code = main(["score", "--manifest", str(self.manifest), "--split", "eval",
                     "--predictions", str(results / "candidate.jsonl"),
                     "--out", str(results / "candidate.results.json"),
                     "--adapter", str(self.adapter)])  # fmt: skip
        assert code == 0
        code = main(["compare", str(self.manifest), "--resamples", "200",
                     "--baseline", str(results / "baseline.results.json"),
                     "--candidate", str(results / "candidate.results.json"),
                     "--out", str(self.run / "comparison.json")])  # fmt: skip
        assert code == 0


def _eval_rows(wrong: set[str]) -> list[tuple[str, str, str]]:
    """The eval split's 20 examples ``(id, label, predicted)``, the ids in ``wrong``
    predicted as billing."""
    cats = ["billing", "shipping", "returns", "technical", "account"]
    return [(f"{c}-{i}", c, "billing" if f"{c}-{i}" in wrong else c)
            for c in cats for i in range(4)]  # fmt: skip


def tighten(*tops: Path) -> None:
    """Folders 0750, files 0640: within the default ``security.max_modes``."""
    for top in tops:
        for path in [top, *top.rglob("*")]:
            path.chmod(0o750 if path.is_dir() else 0o640)


def write_adapter(folder: Path, r: int = 16) -> Path:
    """A peft-format LoRA adapter (zeros) for the project's one-layer tiny Llama."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for mod in TARGETS:
        part = "self_attn" if mod[0] in "qkvo" else "mlp"
        name = f"base_model.model.model.layers.0.{part}.{mod}"
        tensors[name + ".lora_A.weight"] = np.zeros((r, 8), dtype=np.float32)
        tensors[name + ".lora_B.weight"] = np.zeros((8, r), dtype=np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {"peft_type": "LORA", "r": r, "lora_alpha": 32, "lora_dropout": 0.05,
              "target_modules": TARGETS, "bias": "none", "task_type": "CAUSAL_LM"}  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def audit_run(project: Path, tmp_path: Path) -> AuditRun:
    """A clean, complete run: trusted key in the repo, bound adapter, logs, a
    checkpoint, a passing comparison, every mode within the defaults (0640/0750)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ftmanifest.signing.keys import public_key_line

    key = Ed25519PrivateKey.generate()
    root = project.parent
    trust = root / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir()
    trust.write_text(
        f'dev@example.org namespaces="ftmanifest" {public_key_line(key.public_key(), "t")}\n'
    )
    # the eval split the predictions are scored on, and the pinned baseline's results
    (project.parent / "data" / "eval.jsonl").write_text("".join(
        json.dumps({"id": i, "text": f"a {c} ticket", "label": c}) + "\n"
        for i, c, _ in _eval_rows(set())))  # fmt: skip
    (project.parent / "eval" / "baseline.results.json").write_text("{}\n")
    project.write_text(project.read_text().replace("eval/zero.jsonl", "eval/baseline.results.json"))
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("step 1 loss 0.52\nstep 2 loss 0.48\n")
    (run / "checkpoints" / "step-2").mkdir(parents=True)
    write_adapter(run / "checkpoints" / "step-2")
    write_adapter(run / "out" / "docroute-lora-r16")
    out = AuditRun(project, run, key)
    out.relock("trust the binding key")
    tighten(run)
    return out


# --- scoring and comparing (score_test, compare_test, results_cli_test) --------

SPLIT = "sha256:" + "1" * 64
GUARDED = """\
ftmanifest: 1
experiment:
  id: guarded
  task: {task}
  guards:
{guards}
model: {{path: model}}
data:
  - {{name: eval, role: eval, path: eval.jsonl, license: test}}
evaluation: {{procedure: eval-v1}}
"""


def write_predictions(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    """One JSONL line per ``(id, reference, prediction[, category])``."""
    lines = []
    for row in rows:
        item = dict(zip(("id", "reference", "prediction", "category"), row, strict=False))
        lines.append(json.dumps(item) + "\n")
    path.write_text("".join(lines))
    return path


def guarded_manifest(folder: Path, guards: str, task: str = "classification") -> Path:
    """A small manifest with ``guards`` (YAML list items, indented 4) for ``task``."""
    path = folder / f"guarded-{task}.yaml"
    path.write_text(GUARDED.format(task=task, guards=guards))
    return path


def results_doc(
    rows: list[tuple[Any, ...]],
    task: str = "classification",
    *,
    split: str = SPLIT,
    procedure: str | None = "eval-v1",
    fields: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A results document for ``rows`` without hashing any file (compare's input)."""
    from ftmanifest.results.predictions import Prediction
    from ftmanifest.results.score import score

    items = [Prediction(r[0], r[1], r[2], r[3] if len(r) > 3 else None, n)
             for n, r in enumerate(rows, 1)]  # fmt: skip
    metrics, examples = score(items, task, fields=fields)
    if task == "extraction":
        metrics = {**metrics, "format": {"format": "json"}, "required_field_names": list(fields)}
    return {
        "format": "ftmanifest-results",
        "version": 1,
        "task": task,
        "manifest": {"experiment": "guarded", "digest": "sha256:" + "2" * 64},
        "split": {"name": "eval", "path": "eval.jsonl", "digest": split},
        "predictions": {"path": "p.jsonl", "digest": "sha256:" + "3" * 64},
        "procedure": procedure,
        "model": {"tree_digest": None},
        "adapter": None,
        "metrics": metrics,
        "examples": examples,
    }
