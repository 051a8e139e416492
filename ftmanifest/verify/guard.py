"""``ftmanifest.guard``: verify the manifest, and judge the interpreter that called it.

Layer: judging rooms (verify).  The one call a training script makes first,
whatever its loop (a plain torch loop, accelerate, a Trainer)::

    import torch, transformers           # what the script imports, then:
    import ftmanifest
    ftmanifest.guard("manifest.yaml")     # raises GuardRefusedError (exit 1) on any drift

It runs ``verify_manifest`` (model, data, packages, code, signature) and then
judges this very process (``verify.interpreter``): every module imported so far,
the ``.pth`` files and ``sitecustomize`` it processed at start-up, the bytecode
it ran, the start-up variables and the editable installs.  Code imported after
it returns is out of its sight: call it after the script's imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ftmanifest.ledger.guardreport import report_guarded
from ftmanifest.verify.interpreter import InterpreterVerdict, observe_and_judge
from ftmanifest.verify.model_cache import imported_cache_rows
from ftmanifest.verify.pipeline import DriftError, VerifyReport, verify_manifest


class GuardRefusedError(DriftError):
    """Training refused: the manifest drifted, or this interpreter runs code it does not
    pin (``.report`` has every row, ``.findings`` too)."""

    reason = "training-refused"

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report)
        self.message = "training refused: " + self.message
        self.args = (self.message,)
        self.hint = (
            "fix each row as its hint says; a drift of the manifest's files may be accepted "
            "on purpose with guard(M, accept={'FIELD': 'why'}), code the interpreter runs "
            "only by pinning it (environment.env_vars, environment.interpreter.allow_paths)"
        )


def guard(
    manifest: str | Path,
    *,
    signature: bool = True,
    trust_path: Path | None = None,
    accept: Mapping[str, str] | None = None,
    use_cache: bool = True,
    code_dir: Path | None = None,
    allow_outside: bool = False,
) -> VerifyReport:
    """Verify ``manifest`` and judge this interpreter; raise ``GuardRefusedError`` on
    any error row, else return the report (its warnings say what was trusted unjudged).

    The options are ``verify_manifest``'s.  ``accept`` covers the manifest's own rows
    (data, model, packages...), never the interpreter's: code is allowed by the
    signed manifest, not by the script that runs it.
    """
    path = Path(manifest)
    report = verify_manifest(
        path,
        signature=signature,
        trust_path=trust_path,
        accept=accept,
        use_cache=use_cache,
        code_dir=code_dir,
        allow_outside=allow_outside,
    )
    judge_this_interpreter(report, code_dir=code_dir, use_cache=use_cache)
    if not report.ok:
        raise GuardRefusedError(report)
    report_guarded(report.manifest_digest)  # `run --guarded` waits for this word
    return report


def judge_this_interpreter(
    report: VerifyReport, *, code_dir: Path | None = None, use_cache: bool = True
) -> InterpreterVerdict | None:
    """Add this interpreter's rows and warnings to ``report`` (nothing when the
    manifest itself could not be loaded: verify already refused it): its code, and
    the caches its imported huggingface_hub and transformers fixed at import,
    which a script that set ``HF_*`` after importing them loads from."""
    if report.loaded is None:
        return None
    model = getattr(report.observed, "model", None)
    if model is not None:
        report.findings += imported_cache_rows(model)
    verdict = observe_and_judge(
        report.loaded.manifest, report.manifest_path, code_dir=code_dir, use_cache=use_cache
    )
    report.findings += verdict.rows
    report.warnings += verdict.warnings
    return verdict
