"""The Trainer guard's judgement at the start of a run: what this process will train.

Layer: edges - edge (integrations).  ``FtManifestCallback`` (``integrations.transformers``)
takes these methods as a base class: at ``on_train_begin`` it runs ``verify`` over the
manifest, then judges what the Trainer was really handed — the model against the
pinned snapshot (origin and weights), a preference trainer's reference model, the
arguments, objects and first batch against the recipe, the tokenizer, the lr schedule
the steps will be held to and the data set traced to the pinned entries — and this
very interpreter.  The rows go through one acceptance pass; the record of what was
judged goes to ``origin``, ``recipe`` and ``interpreter`` for the run record.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding
from ftmanifest.integrations import model_origin
from ftmanifest.integrations.pinned import compare_weights
from ftmanifest.manifest.model import Manifest
from ftmanifest.verify import VerifyReport, apply_acceptances, verify_manifest
from ftmanifest.verify.guard import judge_this_interpreter

if TYPE_CHECKING:
    from transformers import TrainerState, TrainingArguments


def class_name(obj: Any) -> str:
    """The dotted class of an optimizer or scheduler (the one a wrapper holds)."""
    inner = getattr(obj, "optimizer", None) or getattr(obj, "scheduler", None) or obj
    return f"{type(inner).__module__}.{type(inner).__qualname__}"


def trainer_job(args: TrainingArguments) -> Any:
    """This process's place in a job of more than one process, or None."""
    from ftmanifest.distributed.comm import Job, job_from_env

    job = job_from_env()
    if job is not None:
        return job if job.world_size > 1 else None
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    return Job(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=max(int(getattr(args, "local_rank", 0) or 0), 0),
        local_world_size=dist.get_world_size(),
        node_rank=0,
        master="(initialised by the script)",
    )


class StartOfRun:
    """The start-of-run checks of ``FtManifestCallback`` (its attributes, set there)."""

    manifest: Path
    options: dict[str, Any]
    trace_model: bool
    origin: dict[str, Any]
    interpreter: dict[str, Any]
    recipe: dict[str, Any]
    _begin: tuple[Any, dict[str, Any]] | None
    _schedule: Any
    _schedule_record: dict[str, Any]
    _tokenizer_record: dict[str, Any]

    def _verify(self, model: Any, state: TrainerState, hasher: Any = None) -> VerifyReport:
        """This process's verify, the model's origin rows included (``hasher``: the job's)."""
        options = {k: v for k, v in self.options.items() if k != "accept"}
        report = verify_manifest(self.manifest, hasher=hasher, **options)
        from ftmanifest.probe.packages import TEST_VERSIONS, forced_versions

        if forced_versions():  # loud: this run judges forced package versions (tests only)
            report.warnings.append(f"TEST OVERRIDE ACTIVE: {TEST_VERSIONS} forces versions")
            warnings.warn(report.warnings[-1], stacklevel=2)
        # One acceptance pass over the verify rows and the model's, so an
        # acceptance covers either and the unused ones are warned about once.
        found = report.findings + self._trace(model, state, report) + self._trace_reference()
        found += self._judge_recipe(model, state, report)
        report.findings, report.accepted, unused = apply_acceptances(found, self.options["accept"])
        report.warnings += unused
        # This very process: imported modules, start-up files and variables, bytecode
        # (rows no acceptance covers: the manifest allows code, not the script).
        judged = judge_this_interpreter(
            report, code_dir=self.options["code_dir"], use_cache=bool(self.options["use_cache"])
        )
        if judged is not None:
            self.interpreter = {**judged.interpreter, "judged": dict(judged.judged)}
        return report

    def _trace(self, model: Any, state: TrainerState, report: VerifyReport) -> list[Finding]:
        """Rows refusing ``model`` when it is not the pinned snapshot's (``model_origin``)."""
        if not self.trace_model:
            self.origin = {"traced": False, "reason": "trace_model=False"}
            report.warnings.append(
                "model origin NOT traced (trace_model=False): the model being trained may "
                "not be the snapshot the manifest pins"
            )
            return []
        from ftmanifest.manifest import load_manifest

        base = model_origin.unwrap_model(model)
        name, commit = model_origin.name_and_commit(base)
        pinned = model_origin.read_pinned(
            load_manifest(self.manifest).manifest.model,
            self.manifest,
            allow_outside=bool(self.options["allow_outside"]),
        )
        origin = model_origin.read_origin(name, commit)
        self.origin = {
            "traced": True,
            "name_or_path": name or None,
            "commit_hash": commit,
            "pinned": pinned.label(),
            "weights_compared": 0,
        }
        rows = model_origin.judge_origin(origin, pinned)
        if rows or pinned.folder is None:
            return rows  # a missing snapshot is already a verify row
        if state.global_step > 0:
            report.warnings.append(
                f"model weights not compared: resumed at step {state.global_step}, "
                "they are the checkpoint's"
            )
            return rows
        check = compare_weights(base, pinned.folder)
        self.origin["weights_compared"] = check.compared
        if check.compared == 0 and check.error is None:
            report.warnings.append(
                f"model weights not compared: no safetensors tensor of {pinned.label()} "
                "matches a parameter of the model"
            )
        return model_origin.judge_weights(check, pinned)

    def _trace_reference(self) -> list[Finding]:
        """Rows refusing a preference trainer's reference model (``reference``)."""
        from ftmanifest.integrations import reference
        from ftmanifest.manifest import load_manifest

        if not self.trace_model:
            return []  # the run record says the models were not traced
        trainer = reference.find_trainer(self)
        manifest = load_manifest(self.manifest).manifest
        pinned = model_origin.read_pinned(
            manifest.model, self.manifest, allow_outside=bool(self.options["allow_outside"])
        )
        objective = manifest.training.objective
        kind = objective.kind if objective is not None else None
        record, rows = reference.judge_reference(trainer, trainer is not None, pinned, kind)
        self.origin[reference.NAME] = record
        return rows

    def _judge_recipe(self, model: Any, state: TrainerState, report: VerifyReport) -> list[Finding]:
        """Rows for what the Trainer will really run: arguments, objects, first batch, config."""
        from ftmanifest.integrations import recipe, resume, runtime, start_state
        from ftmanifest.manifest import load_manifest

        if self._begin is None or report.loaded is None:
            return []  # verify already refused the manifest itself
        args, kw = self._begin
        manifest = report.loaded.manifest
        shown = str(self.manifest)
        data, digest = recipe.effective_arguments(args)
        check = recipe.judge_arguments(manifest, data, shown, recipe.argument_defaults(args))
        rows = list(check.rows)
        rows += runtime.judge_runtime(
            manifest, shown, args=args, model=model, optimizer=kw.get("optimizer"),
            max_steps=int(state.max_steps or 0),
        )  # fmt: skip
        size = manifest.training.micro_batch or int(args.per_device_train_batch_size)
        batch, why = runtime.first_batch(kw.get("train_dataloader"), size)
        rows += runtime.judge_batch(manifest, shown, batch, why)
        if model is not None:
            from ftmanifest.integrations.peft_model import judge_peft_model, resolved_peft

            rows += judge_peft_model(model, manifest, shown, resumed=state.global_step > 0)
            rows += self._judge_config(model, load_manifest(self.manifest).manifest, shown)
        rows += start_state.judge_start(model, manifest, shown, resumed=state.global_step > 0,
                                        dataloader=kw.get("train_dataloader"))  # fmt: skip
        resumed, resume_record = resume.judge_resume(
            resume.resume_folder(), int(state.global_step), report.manifest_digest, shown
        )
        rows += resumed
        rows += self._judge_tokenizer(kw.get("processing_class") or kw.get("tokenizer"), shown)
        rows += self._pin_schedule(manifest, shown, int(state.max_steps or 0))
        traced = self._trace_data(kw.get("train_dataloader"), report)
        rows += [f for f in traced.findings if f.severity == "error"]
        optimizer, scheduler = kw.get("optimizer"), kw.get("lr_scheduler")
        self.recipe = {
            "arguments": data,
            "arguments_digest": digest,
            "objective": check.objective,
            "optimizer": None if optimizer is None else class_name(optimizer),
            "lr_scheduler": None if scheduler is None else class_name(scheduler),
            "not_compared": check.not_compared,
            "unpinned": check.unpinned,
            "first_batch": {"judged": batch is not None, "why_not": why},
            "data": traced.record,
            "peft": resolved_peft(model) if model is not None else None,
            "lr_schedule": self._schedule_record,
            "tokenizer": self._tokenizer_record,
            "resume": resume_record,
        }
        return rows

    def _pin_schedule(self, manifest: Manifest, shown: str, total: int) -> list[Finding]:
        """The pinned lr schedule the steps are held to (``integrations.schedule``)."""
        from ftmanifest.integrations.schedule import pinned_schedule

        self._schedule, rows, why = pinned_schedule(manifest, shown, total)
        self._schedule_record = {"compared": self._schedule is not None, "why_not": why}
        return rows

    def _trace_data(self, dataloader: Any, report: VerifyReport) -> Any:
        """The training dataset traced to pinned train entries (``integrations.data_trace``)."""
        from ftmanifest.integrations.data_trace import trace_dataset

        dataset = getattr(dataloader, "dataset", None)
        trace = trace_dataset(
            dataset, self.manifest, "train", allow_outside=bool(self.options["allow_outside"])
        )
        report.warnings += [
            f"{f.field or 'data'}: {f.message}" for f in trace.findings if f.severity != "error"
        ]
        return trace

    def _judge_config(self, model: Any, manifest: Manifest, shown: str) -> list[Finding]:
        from ftmanifest.integrations.model_config import judge_config

        pinned = model_origin.read_pinned(
            manifest.model, self.manifest, allow_outside=bool(self.options["allow_outside"])
        )
        if pinned.folder is None:
            return []  # a missing snapshot is already a verify row
        return judge_config(model_origin.unwrap_model(model), pinned.folder, manifest, shown)

    def _judge_tokenizer(self, processing_class: Any, shown: str) -> list[Finding]:
        """The Trainer's tokenizer against the pinned snapshot's (``pinned_tokenizer``)."""
        from ftmanifest.integrations.pinned_tokenizer import judge_tokenizer
        from ftmanifest.manifest import load_manifest

        if processing_class is None:
            self._tokenizer_record = {"compared": False, "why_not": "no processing_class"}
            return []
        pinned = model_origin.read_pinned(
            load_manifest(self.manifest).manifest.model,
            self.manifest,
            allow_outside=bool(self.options["allow_outside"]),
        )
        if pinned.folder is None:
            return []  # a missing snapshot is already a verify row
        self._tokenizer_record = {"compared": True, "why_not": None}
        return judge_tokenizer(processing_class, pinned.folder, shown)
