"""Run records: what happened when a manifest was verified, run or trained.

Layer: judging rooms (ledger: appends to it).  The signed manifest says what an
experiment is; the ledger (``ftmanifest.ledger``) says what happened to it:
refused, started, completed, failed, abandoned, invalid, and every drift
accepted on purpose with its reason.  ``verify`` (when it accepts a drift),
``run`` and the Trainer guard build their records here and append them to
the ledger of the manifest's repository (``.ftmanifest/ledger``; see
``ftmanifest.ledger.folder``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ftmanifest
from ftmanifest.errors import InputError, UsageError
from ftmanifest.ledger import Ledger, ledger_dir
from ftmanifest.ledger.attempts import attempts, hours_between
from ftmanifest.ledger.folder import shown
from ftmanifest.manifest.environment import fingerprint

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.verify import VerifyReport

RECORD_FORMAT = 1
ATTEMPT_ENV = "FTMANIFEST_ATTEMPT"  # set by `run` for the command, so the Trainer guard joins it


def records_path(manifest_path: Path, ledger: Path | str | None = None) -> Path:
    """The ledger folder the manifest's records go to."""
    return ledger_dir(manifest_path, ledger)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def experiment_of(loaded: LoadedManifest | None) -> dict[str, Any]:
    if loaded is None:
        return {"id": None, "parent": None}
    exp = loaded.manifest.experiment
    return {"id": exp.id, "parent": exp.parent}


def manifest_ref(
    manifest_path: Path,
    digest: str,
    ledger: Path,
    *,
    loaded: LoadedManifest | None = None,
    body: bool = False,
) -> dict[str, Any]:
    """The manifest as a record names it; ``body`` adds its canonical data, so
    a variant's parent can be judged from the ledger when its file is gone."""
    ref: dict[str, Any] = {"path": shown(manifest_path, ledger), "digest": digest}
    if body and loaded is not None:
        ref["body"] = loaded.canonical()
    return ref


def build(
    report: VerifyReport,
    *,
    status: str,
    started_at: str | None = None,
    attempt: str | None = None,
    ledger: Path | str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One record of ``report``: manifest, environment, accepted rows, remaining findings."""
    env = report.environment
    code = None
    if env is not None and env.code.commit is not None:
        code = {"commit": env.code.commit, "dirty": env.code.dirty}
    seeds = None
    if report.loaded is not None:
        seeds = report.loaded.manifest.seeds.model_dump(mode="json", exclude_unset=True)
    folder = records_path(report.manifest_path, ledger)
    record: dict[str, Any] = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": status,
        "attempt": attempt,
        "experiment": experiment_of(report.loaded),
        "manifest": manifest_ref(
            report.manifest_path,
            report.manifest_digest,
            folder,
            loaded=report.loaded,
            body=status in ("started", "planned"),
        ),
        "started_at": started_at or now(),
        "finished_at": None,
        "signature_checked": report.signature_checked,
        "seeds": seeds,
        "environment": {
            "python": None if env is None else env.python,
            "backend": None if env is None else env.backend.model_dump(mode="json"),
            "packages": None if env is None else dict(env.packages),
            "code": code,
            "fingerprint": None if env is None else fingerprint(env),
        },
        "accepted": [
            {
                "field": a.finding.field,
                "rule": a.finding.rule,
                "expected": a.finding.expected,
                "observed": a.finding.observed,
                "reason": a.reason,
            }
            for a in report.accepted
        ],
        "findings": [f.to_dict() for f in report.findings],
        "warnings": list(report.warnings),
    }
    record.update(extra)
    return record


def devices(report: VerifyReport) -> int:
    """Accelerators this run holds (0 on CPU), for accelerator-hours."""
    env = report.environment
    if env is None or env.backend.kind in (None, "cpu"):
        return 0
    return max(1, len(env.backend.devices))


def used(
    started_at: str, finished_at: str, n_devices: int, steps: int | None = None
) -> dict[str, Any]:
    hours = hours_between(started_at, finished_at) or 0.0
    return {"steps": steps, "hours": round(hours, 9), "gpu_hours": round(hours * n_devices, 9)}


def bound_after(run: Mapping[str, Any], bindings: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``bound`` record: adapters of ``run``'s attempt bound after its end
    record was written (``trainer.save_model`` then ``guard.bind(folder)``).
    The attempt's outcome stays its end; ``Attempt.adapter_bindings`` lists these too."""
    manifest = run.get("manifest") or {}
    return {
        "ftmanifest_version": ftmanifest.__version__,
        "status": "bound",
        "attempt": run.get("attempt"),
        "experiment": run.get("experiment"),
        "manifest": {k: manifest[k] for k in ("path", "digest") if k in manifest},
        "bound_at": now(),
        "adapter_bindings": list(bindings),
    }


MARKS = ("abandoned", "invalid")  # what a person records about an attempt after the fact


def check_reason(reason: str | None, flag: str = "--reason") -> str:
    if reason is None or not reason.strip():
        raise UsageError(
            "a mark needs a reason",
            field=flag,
            expected="why the attempt was abandoned or is invalid",
            observed=repr(reason),
            hint="--reason 'loss diverged at step 40'",
        )
    return reason.strip()


def mark(
    manifest_path: Path,
    digest: str,
    status: str,
    reason: str,
    *,
    loaded: LoadedManifest | None = None,
    attempt: str | None = None,
    ledger: Path | str | None = None,
) -> dict[str, Any]:
    """Record that an attempt of ``manifest_path``'s experiment was abandoned or is invalid.

    The manifest stays as signed; the mark is one more ledger record, with the
    manifest's digest, so it stays tied to exactly what was marked.  Without
    ``attempt`` it marks the experiment's latest attempt (a new one if none).
    """
    if status not in MARKS:
        raise UsageError(
            f"cannot mark an experiment {status!r}",
            field="--mark",
            expected=" or ".join(MARKS),
            observed=status,
            hint="started, completed and failed are recorded by `ftmanifest run` itself",
        )
    text = check_reason(reason)
    folder = records_path(manifest_path, ledger)
    experiment = experiment_of(loaded)
    if attempt is None and experiment["id"] is not None:
        mine = [a for a in attempts(Ledger(folder).read().entries)
                if a.experiment == experiment["id"]]  # fmt: skip
        attempt = mine[-1].id if mine else None
    record: dict[str, Any] = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": status,
        "reason": text,
        "attempt": attempt,
        "experiment": experiment,
        "manifest": manifest_ref(manifest_path, digest, folder),
    }
    append(manifest_path, record, ledger=ledger)
    return record


def append(
    manifest_path: Path, record: Mapping[str, Any], *, ledger: Path | str | None = None
) -> Path:
    """Append ``record`` to the manifest's ledger; returns the record's file.

    Raises ``OSError`` when the ledger cannot be written.
    """
    return Ledger(records_path(manifest_path, ledger)).append(record).file


def record_acceptances(
    report: VerifyReport, status: str, *, ledger: Path | str | None = None, **extra: Any
) -> Path:
    """Append the report, with its accepted drift, to the manifest's run records;
    returns the record's file.  An acceptance is never unrecorded: a ledger that
    cannot be written is unusable input (``InputError``), and the caller goes no
    further."""
    try:
        return append(
            report.manifest_path,
            build(report, status=status, ledger=ledger, **extra),
            ledger=ledger,
        )
    except OSError as exc:
        raise InputError(
            "cannot record the accepted drift",
            path=str(records_path(report.manifest_path, ledger)),
            expected="a writable ledger folder (.ftmanifest/ledger or --ledger DIR)",
            observed=exc.strerror or str(exc),
            hint="make the manifest's folder writable, or fix the drift instead of accepting it",
        ) from None


def read(manifest_path: Path, ledger: Path | str | None = None) -> list[dict[str, Any]]:
    """The records about ``manifest_path`` (by its path in the ledger), oldest first."""
    folder = records_path(manifest_path, ledger)
    name = shown(manifest_path, folder)
    out = []
    for e in Ledger(folder).read().entries:
        m = e.record.get("manifest")
        if isinstance(m, dict) and m.get("path") == name:
            out.append(e.record)
    return out
