"""The Hugging Face ``Trainer`` guard: verify at ``on_train_begin``, refuse on drift.

Layer: edges - edge (integrations).  Importing this module imports transformers (the
callback subclasses ``transformers.TrainerCallback``); nothing else in
ftmanifest imports it.  The callback's start-of-run judgement is its base
``guard_start.StartOfRun``, its run record and bindings ``guard_record.RunRecord``;
the checks over the steps and the eval stay here.

    from ftmanifest.integrations.transformers import FtManifestCallback

    trainer = Trainer(..., callbacks=[FtManifestCallback("manifest.yaml")])
    trainer.train()   # raises DriftRefusedError before the first step on any drift

On a clean manifest training runs and a run record
(``<output_dir>/ftmanifest-run.json``) says which manifest, with which
digest, on what environment, with which drifts accepted on purpose; it is
rewritten at the end with the final step.  A refused run leaves a record too
(status ``refused``, with every drift row): abandoned attempts are kept.  The
same records (``started``, then ``completed`` with the steps and hours used)
go to the experiment ledger, as ``verify`` and ``run`` write them
(``ftmanifest.ledger.runrecord``); under ``ftmanifest run`` they join its attempt
($FTMANIFEST_ATTEMPT).

The guard also checks the model it was handed, not only the manifest: the
model must trace back to the pinned snapshot (``model_origin``: its
``config._name_or_path`` is the pinned folder, or the manifest's repo whose
commit is the pinned one) and a leading slice of each of its tensors must
equal the pinned safetensors' (``pinned.compare_weights``).  The safe way in
reads the revision from the manifest, so it is never typed twice:

    model, tokenizer = load_pinned("manifest.yaml")   # offline, from the pinned snapshot

A model that cannot be traced (built from a config in memory) is refused
unless ``FtManifestCallback(..., trace_model=False)``, which the run record notes.

The process itself is judged too (``ftmanifest.verify.interpreter``, the same
judgement as ``ftmanifest.guard``): by ``on_train_begin`` torch, transformers,
peft and the script's own modules are imported, and each file they came from
must be its distribution's RECORD file, the pinned commit's blob, the standard
library or an allowed path; the bytecode run, the ``.pth`` files and
``sitecustomize`` read at start-up and the start-up variables are judged with
them.  The run record's ``interpreter`` names the executable and how many
files each rule judged.

Under DDP/FSDP (torchrun's variables set, or a process group the Trainer
initialised, with more than one process) every rank verifies itself and the
ranks gather their fingerprints before the first step, with a deadline
(``rank_timeout``, seconds): one drifted or different rank, or one that does
not answer, stops the job on every rank with ``RanksRefusedError`` (a
``DriftRefusedError``) naming it.  The manifest's ``distributed`` section is
checked against the job: world size, nodes, and the strategy the
``TrainingArguments`` configure (``fsdp``; ``deepspeed``'s ZeRO stage; else DDP).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from ftmanifest.findings import Finding
from ftmanifest.integrations import batches
from ftmanifest.integrations.builders import (
    dpo_config,
    lora_config,
    sft_config,
    training_arguments,
)
from ftmanifest.integrations.guard_record import RunRecord
from ftmanifest.integrations.guard_start import StartOfRun, trainer_job
from ftmanifest.integrations.pinned import load_pinned
from ftmanifest.ledger import runrecord
from ftmanifest.ledger.guardreport import report_guarded
from ftmanifest.safe_text import escape
from ftmanifest.verify import DriftError, VerifyReport, apply_acceptances

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from ftmanifest.signing.keys import PrivateKey

__all__ = [
    "FtManifestCallback",
    "DriftRefusedError",
    "RanksRefusedError",
    "StepRefusedError",
    "DriftError",
    "RUN_RECORD",
    "load_pinned",
    "training_arguments",
    "sft_config",
    "dpo_config",
    "lora_config",
]

RUN_RECORD = "ftmanifest-run.json"
RECORD_FORMAT = runrecord.RECORD_FORMAT


class DriftRefusedError(DriftError):
    """Training refused before its first step: the manifest drifted (``.report`` has the rows)."""

    reason = "training-refused-drift"

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report)
        self.message = "training refused before the first step: " + self.message
        self.args = (self.message,)
        self.hint = (
            "fix them and start again, or accept a drift on purpose: "
            "FtManifestCallback(manifest, accept={'FIELD': 'why'}) "
            f"(check with: ftmanifest verify {report.manifest_path})"
        )


class EvalRefusedError(DriftError):
    """An evaluation refused before its first batch: its dataset is not the pinned eval data."""

    reason = "evaluation-refused"

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report)
        self.message = "evaluation refused before its first batch: " + self.message
        self.args = (self.message,)
        self.hint = (
            "evaluate on the manifest's eval entries: load_pinned_dataset(MANIFEST, NAME), "
            "or pin the file as an eval entry and re-sign"
        )


class StepRefusedError(DriftError):
    """Training stopped before an optimizer step: it would apply another learning rate
    than the pinned schedule's (``.step``: the optimizer step, counted from 1)."""

    reason = "step-refused"

    def __init__(self, report: VerifyReport, step: int) -> None:
        super().__init__(report)
        self.step = step
        self.message = f"training stopped before optimizer step {step}: " + self.message
        self.args = (self.message,)
        self.hint = (
            "remove what changes the learning rate during training (a callback, a scheduler "
            "or code of its own), or change training.optimizer and re-sign"
        )


class RanksRefusedError(DriftRefusedError):
    """A DDP/FSDP run refused on every rank: the rows name the rank(s) (``extra["rank"]``)."""

    reason = "ranks-refused"

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report)
        named = sorted({str(f.extra.get("rank")) for f in report.findings})
        self.message = (
            f"training refused before the first step on every rank: rank(s) "
            f"{', '.join(named)}: "
            + ", ".join(dict.fromkeys(f.field or f.rule for f in report.findings))
        )
        self.args = (self.message,)

    def __str__(self) -> str:
        rows = (
            f"\n  rank {escape(str(f.extra.get('rank')))} ({escape(str(f.extra.get('host')))}) "
            f"{escape(f.field or f.rule)}: expected {escape(str(f.expected))}, "
            f"observed {escape(str(f.observed))}"
            for f in self.findings
        )
        return escape(self.message) + "".join(rows)


class FtManifestCallback(StartOfRun, RunRecord, TrainerCallback):
    """Verify ``manifest`` when training begins; stop with ``DriftRefusedError`` on drift.

    The keyword options are those of ``ftmanifest.verify.verify_manifest``
    (``signature``, ``trust_path``, ``accept`` = {field: reason}, ...), plus
    ``trace_model``: False trains a model that cannot be traced to the pinned
    snapshot without refusing (the run record says it was not traced).
    ``rank_timeout``: under DDP/FSDP, seconds every rank waits for the others'
    fingerprints before refusing (module doc).

    When the manifest exports an adapter, every adapter the Trainer saves (each
    ``checkpoint-N`` with an ``adapter_config.json``, the last one included) is
    bound to the base (``ftmanifest.adapter.bind``), signed with ``bind_key``
    (an Ed25519 key or the path of one), and listed in the run record.  An
    adapter that cannot be bound stops training with ``BindRefusedError``;
    without ``bind_key`` nothing is signed and the run record says which
    adapters are unbound.  ``bind(folder)`` binds the adapter you save after
    ``train()`` returns (``trainer.save_model`` calls no callback).
    """

    def __init__(
        self,
        manifest: str | Path,
        *,
        signature: bool = True,
        trust_path: Path | None = None,
        accept: Mapping[str, str] | None = None,
        use_cache: bool = True,
        code_dir: Path | None = None,
        allow_outside: bool = False,
        record_name: str = RUN_RECORD,
        trace_model: bool = True,
        bind_key: PrivateKey | str | Path | None = None,
        rank_timeout: float = 300.0,
    ) -> None:
        self.manifest = Path(manifest)
        self.rank_timeout = rank_timeout
        self.options: dict[str, Any] = {
            "signature": signature,
            "trust_path": trust_path,
            "accept": dict(accept or {}),
            "use_cache": use_cache,
            "code_dir": code_dir,
            "allow_outside": allow_outside,
        }
        self.record_name = record_name
        self.trace_model = trace_model
        self.origin: dict[str, Any] = {"traced": False}
        self.interpreter: dict[str, Any] = {}  # the executable judged, files by rule
        self.report: VerifyReport | None = None
        self.record: dict[str, Any] | None = None
        self.record_path: Path | None = None
        self.bind_key = bind_key
        self.bindings: list[dict[str, Any]] = []
        self.recipe: dict[str, Any] = {}
        self._begin: tuple[Any, dict[str, Any]] | None = None
        self._eval_loader: Any = None  # the eval dataloader last judged (held: no id reuse)
        self._ended_main: bool | None = None  # after on_train_end: is this the main process
        self._schedule: Any = None  # the pinned lr schedule (integrations.schedule), when one
        self._steps: Any = None  # its StepGuard over the optimizer, during training
        self._control: TrainerControl | None = None
        self._schedule_record: dict[str, Any] = {}
        self._tokenizer_record: dict[str, Any] = {}
        self._batches: Any = None  # its BatchRecorder (integrations.batches), during training
        self._labels: Any = None  # its LabelGuard (integrations.labels), during training
        self._content: Any = None  # its ContentGuard (integrations.batch_rows), until batch 1

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        started = runrecord.now()
        self._begin = (args, kw)
        job = trainer_job(args)
        if job is None:
            report = self._verify(kw.get("model"), state)
            refusal: DriftRefusedError = DriftRefusedError(report)
        else:
            report, refusal = self._verify_ranks(job, args, state, kw.get("model"))
        self.report = report
        record = self._record(report, args, state, started)
        if report.ok:  # the trainable weights as they start, before the first step
            record.update(batches.start_digest(kw.get("model")))
        record["trackers"] = self._link_trackers(args, state, record)
        if state.is_world_process_zero and args.output_dir:
            self.record_path = Path(args.output_dir) / self.record_name
            self._write(record)
        self.record = record
        if state.is_world_process_zero:
            self._append(record)
        if not report.ok:
            control.should_training_stop = True  # belt and braces; the raise stops it
            raise refusal
        self._control = control
        self._guard_steps(state, kw)
        self._record_batches(args, kw)
        self._guard_labels(state, kw)
        self._guard_content(state, kw)
        report_guarded(report.manifest_digest)  # `run --guarded` waits for this word

    def _guard_steps(self, state: TrainerState, kw: dict[str, Any]) -> None:
        """Hook the optimizer: each step's learning rates against the pinned schedule,
        its other hyper-parameters and the trainable set against train begin's."""
        from ftmanifest.integrations.schedule import StepGuard

        if self._steps is not None:
            self._steps.remove()  # a second train() on the same Trainer
        self._steps = None
        optimizer, schedule = kw.get("optimizer"), self._schedule
        if optimizer is None:
            return
        last = getattr(getattr(kw.get("lr_scheduler"), "scheduler", None)
                       or kw.get("lr_scheduler"), "last_epoch", None)  # fmt: skip
        # A resumed run's scheduler counts the optimizer steps it took (fp16 skips none).
        start = int(state.global_step)
        if isinstance(last, int) and 0 <= last <= start:
            start = last
        self._steps = StepGuard(
            schedule, optimizer, start, str(self.manifest),
            lambda index, rows: self._refuse_step(state, index, rows), model=kw.get("model"),
        )  # fmt: skip
        self.recipe.setdefault("lr_schedule", {})["hooked"] = self._steps.hooked

    def _record_batches(self, args: TrainingArguments, kw: dict[str, Any]) -> None:
        """What the Trainer feeds the model, its first micro-batches (``integrations.batches``)."""
        if self._batches is not None:
            self._batches.remove()  # a second train() on the same Trainer
        tokenizer = kw.get("processing_class") or kw.get("tokenizer")
        assert self.record is not None
        self._batches = batches.BatchRecorder(kw.get("model"), args, tokenizer, self.record)

    def _guard_labels(self, state: TrainerState, kw: dict[str, Any]) -> None:
        """Each training batch's loss positions against ``loss_on`` (``integrations.labels``)."""
        from ftmanifest.integrations import labels

        if self._labels is not None:
            self._labels.remove()  # a second train() on the same Trainer
        loaded, record = self.report.loaded if self.report else None, self.record or {}
        self._labels = labels.install(
            kw.get("model"), loaded.manifest if loaded else None, str(self.manifest),
            lambda rows: self._refuse_step(state, state.global_step, rows), record,
        )  # fmt: skip

    def _guard_content(self, state: TrainerState, kw: dict[str, Any]) -> None:
        """The first batch's examples against the pinned rows (``integrations.batch_rows``)."""
        from ftmanifest.integrations import batch_rows

        if self._content is not None:
            self._content.remove()  # a second train() on the same Trainer
        loaded = self.report.loaded if self.report else None
        self._content = batch_rows.install(
            kw.get("model"), kw.get("processing_class") or kw.get("tokenizer"),
            kw.get("train_dataloader"), self.recipe.get("data") or {},
            loaded.manifest if loaded else None, str(self.manifest),
            lambda rows: self._refuse_step(state, state.global_step, rows), self.record or {},
        )  # fmt: skip

    def _refuse_step(self, state: TrainerState, index: int, rows: list[Finding]) -> None:
        rows, accepted, _unused = apply_acceptances(rows, self.options["accept"])
        if not rows:
            return  # accepted on purpose; the begin record names the acceptance
        base = self.report
        report = VerifyReport(
            manifest_path=Path(self.manifest),
            manifest_digest=base.manifest_digest if base is not None else "",
            findings=rows,
            accepted=accepted,
        )
        self._stop(state, StepRefusedError(report, index + 1))

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self._steps is not None and not self._steps.hooked:
            self._steps.check()  # an optimizer without step hooks: checked from here

    def _link_trackers(
        self, args: TrainingArguments, state: TrainerState, record: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Tag the MLflow / W&B runs the Trainer reports to with this attempt
        (``integrations.trackers``); the links the attempt records."""
        if not state.is_world_process_zero:
            return []  # trackers run on the main process only
        from ftmanifest.integrations.trackers import link_trackers, tags_for

        links, problems = link_trackers(getattr(args, "report_to", None), tags_for(record))
        for problem in problems:
            record["warnings"].append(problem)
            warnings.warn(problem, stacklevel=3)
        return links

    def _verify_ranks(
        self, job: Any, args: TrainingArguments, state: TrainerState, model: Any
    ) -> tuple[VerifyReport, DriftRefusedError]:
        """Every rank verifies, then all gather and judge (``ftmanifest.distributed``)."""
        from ftmanifest.distributed.comm import joined
        from ftmanifest.distributed.fingerprint import strategy_from_args
        from ftmanifest.distributed.verify import verify_job

        with joined(job, self.rank_timeout) as comm:
            verdict, mine = verify_job(
                comm,
                self.manifest,
                lambda hasher: self._verify(model, state, hasher),
                strategy=strategy_from_args(args, job.world_size),
                accept=self.options["accept"],
                use_cache=bool(self.options["use_cache"]),
                allow_outside=bool(self.options["allow_outside"]),
            )
        report = mine or VerifyReport(self.manifest, "", [])
        report.findings = list(verdict.rows)
        report.accepted += verdict.accepted
        for fp in verdict.prints:
            if fp.get("test_override") and fp["rank"] != job.rank:
                report.warnings.append(f"rank {fp['rank']}: TEST OVERRIDE ACTIVE")
        return report, RanksRefusedError(report)

    def on_prediction_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        """The eval dataset, traced to pinned eval entries at its first batch.

        The Trainer builds the eval dataloader only when it evaluates (after
        ``on_train_begin``), so each evaluation's dataset is judged here,
        before a batch of it is scored: an unpinned file refuses the
        evaluation, and the run with it."""
        loader = kw.get("eval_dataloader")
        if loader is None or loader is self._eval_loader:
            return  # one judgement per dataloader: the Trainer builds one per evaluation
        self._eval_loader = loader
        dataset = getattr(loader, "dataset", None)
        from ftmanifest.integrations.data_trace import trace_dataset

        trace = trace_dataset(
            dataset, self.manifest, "eval", allow_outside=bool(self.options["allow_outside"])
        )
        errors = [f for f in trace.findings if f.severity == "error"]
        rows, accepted, _unused = apply_acceptances(errors, self.options["accept"])
        if self.record is not None and trace.record not in self.record.setdefault("eval_data", []):
            self.record["eval_data"].append(trace.record)
        if rows:
            base = self.report
            report = VerifyReport(
                manifest_path=Path(self.manifest),
                manifest_digest=base.manifest_digest if base is not None else "",
                findings=rows,
                accepted=accepted,
            )
            self._control = control
            self._stop(state, EvalRefusedError(report))

    def _stop(self, state: TrainerState, refusal: DriftError) -> None:
        """Record the run as failed with ``refusal``'s rows, stop the Trainer, raise it."""
        if self.record is not None and state.is_world_process_zero:
            self.record.update(
                status="failed",
                reason=refusal.message,
                findings=[f.to_dict() for f in refusal.findings],
                finished_at=runrecord.now(),
                final_global_step=state.global_step,
            )
            self.record.get("manifest", {}).pop("body", None)
            if self.record_path is not None:
                self._write(self.record)
            self._append(self.record)
        if self._control is not None:
            self._control.should_training_stop = True  # belt and braces; the raise stops it
        if self._steps is not None:
            self._steps.remove()
        raise refusal

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        if state.is_world_process_zero:
            folder = Path(args.output_dir or ".") / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            self._bind_checkpoint(folder, state)  # first: the adapter's signature covers it
            self._bind_if_adapter(folder)

    def _bind_checkpoint(self, folder: Path, state: TrainerState) -> None:
        """Bind the saved checkpoint to this manifest, so a resume can prove it is this
        run's (``integrations.resume``)."""
        from ftmanifest.integrations import resume

        if self.report is None or self.record is None or not folder.is_dir():
            return
        entry = resume.bind_checkpoint(folder, self.report.manifest_digest, state.global_step)
        self.record.setdefault("checkpoints", []).append(entry)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self._batches is not None:
            self._batches.remove()
        if self._labels is not None:
            self._labels.remove()
        if self._steps is not None:
            self.recipe.setdefault("lr_schedule", {})["steps_checked"] = self._steps.checked
            self._steps.remove()
        if self.record is None:
            return
        if "lr_schedule" in self.recipe:
            self.record.setdefault("recipe", {})["lr_schedule"] = dict(self.recipe["lr_schedule"])
        finished = runrecord.now()
        started = str(self.record.get("started_at") or finished)
        steps = state.global_step - int(self.record.get("start_global_step") or 0)
        devices = runrecord.devices(self.report) if self.report is not None else 0
        self.record.update(
            status="completed",
            finished_at=finished,
            final_global_step=state.global_step,
            adapter_bindings=list(self.bindings),
            budget_used=runrecord.used(started, finished, devices, steps=steps),
        )
        self.record.get("manifest", {}).pop("body", None)  # the started record holds it
        self._ended_main = bool(state.is_world_process_zero)
        if state.is_world_process_zero:
            if self.record_path is not None:
                self._write(self.record)
            self._append(self.record)
