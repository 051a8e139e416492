"""Manifest versus observations: one ``Finding`` (kind ``drift``) per difference.

Layer: judging rooms - pure core.  Takes the validated manifest and ``observe.Observed``
data and returns rows with the field, expected and observed values, a severity and the
fix; it never reads the disk or decides exit codes.  ``DRIFT_CHECKS`` lists the checks
in the order their rows are reported, by what they read: the environment
(``drift_env``), the training code (``drift_code``), the pinned model, data and files
(``drift_files``) and the model cache (``model_cache``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ftmanifest.checks import Check, FunctionCheck, registry, run_checks
from ftmanifest.verify.drift_code import _code
from ftmanifest.verify.drift_env import _backend, _disk, _env_vars, _packages, _python
from ftmanifest.verify.drift_files import _data, _model, _pinned
from ftmanifest.verify.model_cache import model_cache_rows

if TYPE_CHECKING:
    from ftmanifest.findings import Finding
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.verify.observe import Observed


def compare(
    manifest: Manifest, seen: Observed, *, only: Iterable[str] | None = None
) -> list[Finding]:
    """Every drift row of ``seen`` against ``manifest`` (``DRIFT_CHECKS``, in order)."""
    return run_checks(DRIFT_CHECKS, manifest, seen, only=only)


# The drift checks, in the order their rows are reported; each names the parts
# of ``observe.Observed`` it reads.
DRIFT_CHECKS: dict[str, Check] = registry(
    FunctionCheck("python", ("environment",), _python),
    FunctionCheck("packages", ("installed",), _packages),
    FunctionCheck("backend", ("environment",), _backend),
    FunctionCheck("env-vars", ("env_values",), _env_vars),
    FunctionCheck("code", ("environment", "code_ancestry"), _code),
    FunctionCheck("model", ("model",), _model),
    FunctionCheck("model-cache", ("model", "installed"), model_cache_rows),
    FunctionCheck("data", ("data",), _data),
    FunctionCheck("pinned-files", ("pinned",), _pinned),
    FunctionCheck("disk", ("disk_free", "disk_path"), _disk),
)
