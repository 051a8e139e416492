"""Test support: pin on purpose what the in-process guard would refuse (tests do not sign).

A test harness runs code the training repository does not hold: a rank script
written to the test's folder, a ``sitecustomize`` on ``PYTHONPATH`` that hides a
package.  The guard judges the interpreter as it would a user's, so such a test
says in its manifest what it runs, as a user would: the folder in
``environment.interpreter.allow_paths``, the variable in ``environment.env_vars``.
"""

from __future__ import annotations

from pathlib import Path

from ftmanifest.manifest.edit import apply_yaml


def pin(
    manifest: Path,
    *,
    allow: list[str] | None = None,
    env_vars: dict[str, str] | None = None,
    packages: dict[str, str] | None = None,
) -> Path:
    """Add ``allow`` paths, pinned variables and package pins to ``manifest`` in place."""
    text = manifest.read_text("utf-8")
    ups: list[tuple[tuple[str | int, ...], object]] = []
    if allow:
        ups.append((("environment", "interpreter", "allow_paths"), list(allow)))
    ups += [(("environment", "env_vars", k), v) for k, v in (env_vars or {}).items()]
    ups += [(("environment", "packages", k), v) for k, v in (packages or {}).items()]
    manifest.write_text(apply_yaml(text, ups), "utf-8")
    return manifest
