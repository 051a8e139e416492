"""The command's own interpreter, observed as it will start, and judged as verify judges.

Layer: judging rooms - verify (edge: starts the command's interpreter once).  ``run``
verified the manifest in its own process; the training command may start another Python
(another venv, another ``PATH``, ``PYTHONPATH``, ``env A=1``).  This starts *that*
interpreter, with the command's options, environment and folder, on a stdlib-only probe
that reports its Python version, prefixes, the distributions ``importlib.metadata``
finds there (the versions ``import`` would load) and, for ``python -m NAME``, where
NAME's top-level package is found.  The same drift checks verify runs (Python, packages,
pinned variables) then judge it, so the rows read the same.

The probe runs with the command's start-up: whatever the interpreter runs at
start (``.pth`` lines, ``sitecustomize``) runs for the probe too, as it would
for the command, before ``run`` refuses.  Its answer goes to a private file,
not stdout, so a start-up file that prints cannot garble it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ftmanifest.errors import InputError, RefusedError
from ftmanifest.findings import Finding
from ftmanifest.probe import interpreter as observation_source
from ftmanifest.probe.packages import collect
from ftmanifest.verify.command import ScriptNotPinnedError
from ftmanifest.verify.drift import compare
from ftmanifest.verify.interpreter import judge_interpreter
from ftmanifest.verify.model_cache import command_cache_rows

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.verify.launch import Launch
    from ftmanifest.verify.observe import Observed

PROBE_TIMEOUT_S = 120.0
CHILD_CHECKS = ("python", "packages", "env-vars")

# Runs under any Python 3.8+: no ftmanifest, stdlib only.  argv: OUT [MODULE].
PROBE_SOURCE = r"""
import importlib.machinery, json, os, platform, sys
from importlib import metadata
out, module = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
packages = {}
for dist in metadata.distributions():
    name, version = dist.metadata["Name"], dist.version
    if name and version:
        packages.setdefault(name, version)
origin = None
if module:
    top = module.split(".")[0]
    path = [os.getcwd()] + [p for p in sys.path[1:]]
    spec = importlib.machinery.PathFinder.find_spec(top, path)
    if spec is not None:
        origin = spec.origin if spec.origin not in (None, "namespace") else (
            list(spec.submodule_search_locations or [None])[0])
    elif top in sys.builtin_module_names:
        origin = "built-in"
answer = {
    "python": platform.python_version(),
    "implementation": platform.python_implementation(),
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "packages": packages,
    "module": module or None,
    "module_origin": origin,
}
with open(out, "w", encoding="utf-8") as fh:
    json.dump(answer, fh)
"""


class ChildRefusedError(RefusedError):
    """The interpreter the command will run is not the one the manifest pins."""

    reason = "command-interpreter"


@dataclass(frozen=True)
class ChildInterpreter:
    """What the command's interpreter reported about itself."""

    executable: str
    python: str
    prefix: str
    base_prefix: str
    packages: dict[str, str]
    module: str | None
    module_origin: str | None
    launched: str  # the interpreter as the command names it


def probe_child(launch: Launch, environ: Mapping[str, str], cwd: Path) -> ChildInterpreter:
    """Start ``launch``'s interpreter as the command will, on the probe."""
    assert launch.interpreter is not None
    env = {**environ, **launch.env}
    with tempfile.TemporaryDirectory(prefix="ftmanifest-probe-") as tmp:
        answer = Path(tmp) / "answer.json"
        argv = [str(launch.interpreter), *launch.options, "-c", PROBE_SOURCE, str(answer)]
        if launch.module:
            argv.append(launch.module)
        try:
            done = subprocess.run(
                argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _cannot(launch, f"{type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(answer.read_text("utf-8"))
        except (OSError, ValueError):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise _cannot(launch, f"exit {done.returncode}: {tail}") from None
    return ChildInterpreter(
        executable=str(data.get("executable") or ""),
        python=str(data.get("python") or ""),
        prefix=str(data.get("prefix") or ""),
        base_prefix=str(data.get("base_prefix") or ""),
        packages={str(k): str(v) for k, v in dict(data.get("packages") or {}).items()},
        module=data.get("module"),
        module_origin=data.get("module_origin"),
        launched=str(launch.interpreter),
    )


def child_findings(
    manifest: Manifest, seen: Observed, child: ChildInterpreter, environ: Mapping[str, str]
) -> list[Finding]:
    """verify's Python, package and variable rows, for the command's interpreter;
    and the model's cache rows when the command reads other caches (``HF_*``)."""
    installed = collect(child.packages.items())
    view = SimpleNamespace(
        **{
            **vars(seen),
            "installed": installed,
            "environment": seen.environment.model_copy(update={"python": child.python}),
            "env_values": {k: environ.get(k) for k in manifest.environment.env_vars},
        }
    )
    where = f" in the command's interpreter {child.launched}"
    rows = compare(manifest, view, only=CHILD_CHECKS)  # type: ignore[arg-type]
    rows += command_cache_rows(manifest, seen, environ, installed.get("transformers"))
    return [r._replace(message=r.message + where) for r in rows]


def startup_findings(
    launch: Launch,
    environ: Mapping[str, str],
    cwd: Path,
    manifest: Manifest,
    manifest_path: Path,
    code_dir: Path | None = None,
) -> list[Finding]:
    """The guard's judgement of what the command's interpreter runs at start-up
    (``.pth`` lines, ``sitecustomize``, ``PYTHONPATH``, ``LD_PRELOAD``...), from the
    guard's own stdlib-only observation run in that interpreter."""
    assert launch.interpreter is not None
    source = Path(observation_source.__file__).read_text("utf-8")
    argv = [str(launch.interpreter), *launch.options, "-c", source]
    try:
        done = subprocess.run(
            argv, env={**environ, **launch.env}, cwd=cwd, capture_output=True, text=True,
            timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _cannot(launch, f"{type(exc).__name__}: {exc}") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        observed = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise _cannot(launch, f"exit {done.returncode}: {tail}") from None
    verdict = judge_interpreter(
        observed, manifest, manifest_path, code_dir=code_dir, same_process=False
    )
    where = f" (the command's interpreter {launch.interpreter})"
    return [r._replace(message=r.message + where) for r in verdict.rows]


def check_module_pinned(child: ChildInterpreter, root: Path | None, pinned: str | None) -> None:
    """Refuse ``python -m NAME`` when NAME is found outside the pinned repository (a
    second ``git worktree``, another checkout), and not among the installed packages."""
    if child.module is None or pinned is None or root is None:
        return
    origin = child.module_origin
    if origin == "built-in":
        return
    if origin is not None:
        real, top = os.path.realpath(origin), os.path.realpath(root)
        if real == top or real.startswith(top + os.sep) or _installed(real, child):
            return
    raise ScriptNotPinnedError(
        f"python -m {child.module} runs code outside the repository the manifest pins",
        path=origin,
        field="environment.code.commit",
        expected=f"{child.module} inside {root} (commit {pinned[:12]}) or an installed package",
        observed=origin or "not found by the command's interpreter",
        hint=f"run it from {root}, or commit it there and `ftmanifest lock` again",
    )


def _installed(path: str, child: ChildInterpreter) -> bool:
    """Under the interpreter's own prefixes (its site-packages, its standard library)."""
    tops = {os.path.realpath(p) for p in (child.prefix, child.base_prefix) if p}
    return any(path.startswith(t + os.sep) for t in tops)


def _cannot(launch: Launch, why: str) -> InputError:
    return InputError(
        f"cannot start the command's interpreter {launch.interpreter} to check it",
        field="CMD",
        expected="an interpreter that starts and answers the probe",
        observed=why,
        hint="run the command's interpreter by hand to see why it fails, or fix the command",
    )
