"""Drift of the environment the run happens in: Python, packages, the compute backend,
environment variables and free disk.

Layer: judging rooms - pure core.  What flows through here is ``Observed``'s
``environment``, ``installed``, ``env_values`` and ``disk_free`` against the manifest's
``environment`` and budget; a package pin is compared as an exact version
(``exact_pin``, ``same_version``).  It never reads the disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.manifest.patterns import normalize_name
from ftmanifest.verify.drift_row import row

if TYPE_CHECKING:
    from ftmanifest.findings import Severity
    from ftmanifest.location import Loc
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.verify.observe import Observed

GIB = 1 << 30


def _python(m: Manifest, seen: Observed) -> Iterator[Finding]:
    want, have = m.environment.python, seen.environment.python
    if want and want != have:
        yield row(
            "drift.python",
            ("environment", "python"),
            "Python version differs",
            want,
            have,
            f"run with Python {want} (e.g. a venv made with python{want.rsplit('.', 1)[0]})",
        )


_EXACT_PIN = re.compile(r"^\s*(===?)\s*([^\s,;*]+)\s*$")


def exact_pin(spec: str) -> tuple[str, str] | None:
    """``("==", "2.13.0+cpu")`` for an exact pin; None for ranges, wildcards, bare versions."""
    match = _EXACT_PIN.match(spec)
    return (match.group(1), match.group(2)) if match else None


def same_version(op: str, want: str, have: str) -> bool | None:
    """PEP 440 equality (local labels such as ``+cpu`` count); None: ``want`` is no version."""
    if op == "===":
        return want == have  # arbitrary equality: the same string (PEP 440)
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(want)
    except InvalidVersion:
        return None
    try:
        return wanted == Version(have)
    except InvalidVersion:
        return want == have


def _packages(m: Manifest, seen: Observed) -> Iterator[Finding]:
    installed = {normalize_name(k): v for k, v in seen.installed.items()}
    for name, spec in m.environment.packages.items():
        have = installed.get(normalize_name(name))
        field = ("environment", "packages", name)
        shown = "absent" if have is None else f"=={have}"
        pin = exact_pin(spec)
        equal = None if pin is None else same_version(*pin, have) if have is not None else False
        if pin is None or equal is None:
            # Verify judges what is installed against one version; a range says
            # nothing reproducible, so it is refused here, not only by lint.
            yield row(
                "drift.package-unpinned",
                field,
                f"package {name} is not pinned to one exact PEP 440 version",
                "==<version>",
                f"{spec!r} (installed: {shown})",
                f"write '{name}: =={have}' (`ftmanifest lock` pins what is installed)"
                if have
                else f"write '{name}: ==<version>' and install it",
            )
        elif have is None:
            yield row(
                "drift.package",
                field,
                f"package {name} is not installed",
                f"{pin[0]}{pin[1]}",
                "absent",
                f"pip install '{name}{pin[0]}{pin[1]}'",
            )
        elif not equal:
            yield row(
                "drift.package",
                field,
                f"package {name} version differs",
                f"{pin[0]}{pin[1]}",
                shown,
                f"pip install '{name}{pin[0]}{pin[1]}'",
            )


def _backend(m: Manifest, seen: Observed) -> Iterator[Finding]:
    want = m.environment.backend
    have = seen.environment.backend
    for key, what in (
        ("kind", "backend"),
        ("runtime", "runtime version"),
        ("dnn", "cuDNN/MIOpen version"),
        ("collectives", "NCCL/RCCL version"),
        ("driver", "driver version"),
    ):
        expected = getattr(want, key)
        if expected is not None and str(expected) != str(getattr(have, key)):
            yield row(
                "drift.backend",
                ("environment", "backend", key),
                f"{what} differs",
                expected,
                getattr(have, key) or "absent",
                "run on the recorded backend, or re-lock and re-check quality "
                "(a platform change means redoing the start and quality checks)",
            )
    observed_devices = have.devices
    for i, dev in enumerate(want.devices):
        match = next((d for d in observed_devices if d.name == dev.name), None)
        if match is None and dev.compute_capability:
            match = next(
                (d for d in observed_devices if d.compute_capability == dev.compute_capability),
                None,
            )
        field: Loc = ("environment", "backend", "devices", i)
        seen_text = (
            ", ".join(f"{d.name} x{d.count} (cc {d.compute_capability})" for d in observed_devices)
            or "no accelerator"
        )
        if match is None:
            yield row(
                "drift.device",
                field,
                f"device {dev.name} not found",
                f"{dev.name} x{dev.count} (cc {dev.compute_capability})",
                seen_text,
                "run on the recorded devices",
            )
            continue
        if dev.compute_capability and match.compute_capability != dev.compute_capability:
            yield row(
                "drift.device",
                (*field, "compute_capability"),
                "device compute capability differs",
                dev.compute_capability,
                match.compute_capability,
                "run on the recorded devices",
            )
        if match.count < dev.count:
            yield row(
                "drift.device",
                (*field, "count"),
                f"fewer {dev.name} devices",
                dev.count,
                match.count,
                "run with every recorded device visible",
            )


def _env_vars(m: Manifest, seen: Observed) -> Iterator[Finding]:
    for name, want in m.environment.env_vars.items():
        have = seen.env_values.get(name)
        if have != want:
            yield row(
                "drift.env-var",
                ("environment", "env_vars", name),
                f"environment variable {name} differs",
                want,
                "unset" if have is None else have,
                f"export {name}='{want}'",
            )


def _disk(m: Manifest, seen: Observed) -> Iterator[Finding]:
    if seen.disk_free is None:
        return
    declared = m.experiment.budget.disk_gib
    severity: Severity
    if declared is not None:
        need, severity = int(declared * GIB), "error"
    else:
        weights = sum(f.size or 0 for f in m.model.files)
        need, severity = 2 * weights, "warning"  # a checkpoint and an export, at least
    if need and seen.disk_free < need:
        yield row(
            "drift.disk",
            ("experiment", "budget", "disk_gib"),
            "not enough free disk for the run",
            f">= {need / GIB:.1f} GiB",
            f"{seen.disk_free / GIB:.1f} GiB free",
            f"free space under {seen.disk_path} or point export.path elsewhere",
            severity=severity,
            path=seen.disk_path,
        )
