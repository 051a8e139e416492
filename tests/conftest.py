"""Shared test helpers: example manifests, mutated copies, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Correctness, not speed: a loaded 2-core CI machine must not fail a property
# test on Hypothesis' 200 ms default deadline.
settings.register_profile("ftmanifest", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ftmanifest")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "manifests").glob("*.yaml"))
# A git identity and no user/system config, for the real git repos tests build.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
CLF = ROOT / "manifests" / "docroute-lora-r16.yaml"
EXTRACT = ROOT / "manifests" / "invoice-extract-lora-r8.yaml"


def pytest_configure(config: pytest.Config) -> None:
    """Keep every test (and the CLI subprocesses it starts) out of the user's caches."""
    import tempfile

    os.environ["FTMANIFEST_CACHE_DIR"] = tempfile.mkdtemp(prefix="ftm-test-cache-")


@pytest.fixture
def mutate(tmp_path: Path) -> Callable[..., Path]:
    """Copy an example manifest with text replacements; each must apply once."""

    def make(
        old: str, new: str, *more: tuple[str, str], source: Path = CLF, name: str = "m.yaml"
    ) -> Path:
        text = source.read_text("utf-8")
        for a, b in ((old, new), *more):
            assert text.count(a) >= 1, f"{a!r} not in {source.name}"
            text = text.replace(a, b, 1)
        out = tmp_path / name
        out.write_text(text, "utf-8")
        return out

    return make


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a fresh interpreter."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FTMANIFEST_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ftmanifest", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
