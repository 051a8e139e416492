"""The Trainer guard's record of a run: the run record file, the ledger, the bindings.

Layer: edges - edge (integrations).  ``FtManifestCallback`` (``integrations.transformers``)
takes these methods as a base class.  The run record (``<output_dir>/ftmanifest-run.json``)
is built from the start-of-run report and rewritten at the end; the same records go
to the ledger beside the manifest (``ledger.runrecord``), and an accepted drift that
cannot be recorded refuses training.  An adapter the run saves is bound to the base
and signed with ``bind_key`` (``adapter.bind``); one saved after ``train()`` returns is
bound by ``bind(folder)`` and recorded late, as a ``bound`` record of the same attempt.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import InputError
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.ledger import runrecord
from ftmanifest.verify import VerifyReport

if TYPE_CHECKING:
    from transformers import TrainerState, TrainingArguments

    from ftmanifest.signing.keys import PrivateKey


class RunRecord:
    """The record and binding methods of ``FtManifestCallback`` (its attributes, set there)."""

    manifest: Path
    options: dict[str, Any]
    origin: dict[str, Any]
    interpreter: dict[str, Any]
    recipe: dict[str, Any]
    record: dict[str, Any] | None
    record_path: Path | None
    bind_key: PrivateKey | str | Path | None
    bindings: list[dict[str, Any]]
    _ended_main: bool | None

    def bind(self, folder: str | Path) -> dict[str, Any]:
        """Bind the adapter in ``folder`` to the manifest's base (signed with
        ``bind_key``); returns what the run record keeps about it."""
        from ftmanifest.adapter.bind import bind_adapter

        folder = Path(folder)
        if self.bind_key is None:
            entry: dict[str, Any] = {
                "path": str(folder),
                "bound": False,
                "reason": "no bind_key given to FtManifestCallback",
            }
            warnings.warn(
                f"adapter {folder} not bound: pass bind_key= to FtManifestCallback, or run "
                f"ftmanifest bind {folder} --manifest {self.manifest} --key KEY",
                stacklevel=2,
            )
        else:
            result = bind_adapter(
                folder,
                self.manifest,
                self._key(),
                use_cache=self.options["use_cache"],
                allow_outside=self.options["allow_outside"],
                key_path=self._key_path(),
            )
            entry = {
                "path": str(folder),
                "bound": True,
                "base_tensor_digest": result.binding.base_tensor_digest,
                "envelope": str(result.envelope_path),
                "model_sig": str(result.model_sig) if result.model_sig else None,
            }
        self.bindings.append(entry)
        self._record_late_binding(entry)
        return entry

    def _record_late_binding(self, entry: dict[str, Any]) -> None:
        """After the run's end record, a binding goes to the run record file
        and to the ledger as a ``bound`` record of the same attempt."""
        if not self._ended_main or self.record is None:
            return  # during training on_train_end records it; other ranks record nothing
        self.record["adapter_bindings"] = list(self.bindings)
        if self.record_path is not None:
            self._write(self.record)
        self._append(runrecord.bound_after(self.record, [entry]))

    def _bind_if_adapter(self, folder: Path) -> None:
        if self._export_folder() is None:
            return  # the manifest exports no adapter: nothing to bind
        if (folder / "adapter_config.json").is_file():
            self.bind(folder)

    def _export_folder(self) -> Path | None:
        from ftmanifest.manifest import load_manifest

        export = load_manifest(self.manifest).manifest.export
        if export is None or export.kind != "adapter":
            return None
        return self.manifest.parent / export.path

    def _key(self) -> PrivateKey:
        from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        if isinstance(self.bind_key, (Ed25519PrivateKey, EllipticCurvePrivateKey)):
            return self.bind_key
        assert self.bind_key is not None  # the caller records an unbound adapter instead
        from ftmanifest.signing.keys import load_private_key

        return load_private_key(Path(self.bind_key))

    def _key_path(self) -> Path | None:
        """The key file ``bind_key`` names (model.sig is made from the file), or None."""
        return Path(self.bind_key) if isinstance(self.bind_key, (str, Path)) else None

    def _record(
        self, report: VerifyReport, args: TrainingArguments, state: TrainerState, started: str
    ) -> dict[str, Any]:
        import os

        from ftmanifest.ledger import new_attempt

        return runrecord.build(
            report,
            status="started" if report.ok else "refused",
            started_at=started,
            attempt=os.environ.get(runrecord.ATTEMPT_ENV) or new_attempt(),
            start_global_step=state.global_step,
            final_global_step=None,
            model_origin=dict(self.origin),
            interpreter=dict(self.interpreter),
            recipe=dict(self.recipe),
            trainer={
                "seed": args.seed,
                "data_seed": args.data_seed,
                "max_steps": state.max_steps,
                "world_size": args.world_size,
                "output_dir": args.output_dir,
            },
        )

    def _append(self, record: Mapping[str, Any]) -> None:
        """Add ``record`` to the run records beside the manifest (as ``verify`` and ``run`` do).

        A drift accepted on purpose is never left unrecorded: if that record
        cannot be written, training is refused.
        """
        try:
            runrecord.append(self.manifest, record)
        except OSError as exc:
            where = runrecord.records_path(self.manifest)
            if record.get("accepted"):
                raise InputError(
                    "cannot record the accepted drift",
                    path=str(where),
                    expected="a writable ledger folder (.ftmanifest/ledger)",
                    observed=exc.strerror or str(exc),
                    hint="make the manifest's folder writable, or fix the drift instead",
                ) from None
            warnings.warn(f"run record not written to {where}: {exc}", stacklevel=2)

    def _write(self, record: Mapping[str, Any]) -> None:
        assert self.record_path is not None
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.record_path, json.dumps(record, indent=2, default=str) + "\n")
