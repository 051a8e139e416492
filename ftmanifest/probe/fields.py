"""Map an observation to the manifest's ``environment`` section (a plain dict).

Layer: probes and runtime - probe (pure).  ``ftmanifest lock`` writes what this returns;
the dict validates as ``ftmanifest.manifest.environment.Environment``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ftmanifest.probe.packages import normalize_name

if TYPE_CHECKING:
    from ftmanifest.probe import Observation


def package_pins(installed: dict[str, str], names: Iterable[str] | None = None) -> dict[str, str]:
    """{normalised name: '==version'} for ``names`` (all when None).

    A requested name that is not installed is left out; compare the keys with
    the request to find them (``missing_packages``).
    """
    if names is None:
        wanted = sorted(installed)
    else:
        wanted = sorted({normalize_name(n) for n in names})
    return {name: f"=={installed[name]}" for name in wanted if name in installed}


def missing_packages(installed: dict[str, str], names: Iterable[str]) -> list[str]:
    """Normalised names among ``names`` that are not installed."""
    return sorted({normalize_name(n) for n in names} - set(installed))


def to_environment_fields(
    observation: Observation, packages: Iterable[str] | None = None
) -> dict[str, object]:
    """The ``environment`` section's fields filled from ``observation``.

    ``packages`` names the distributions to pin (None pins every installed one).
    ``code`` is filled only when the git probe found a commit.
    """
    backend = observation.backend
    fields: dict[str, object] = {
        "python": observation.system.python,
        "packages": package_pins(observation.packages, packages),
        "backend": {
            "kind": backend.kind,
            "runtime": backend.runtime,
            "dnn": backend.dnn,
            "collectives": backend.collectives,
            "driver": backend.driver,
            "devices": [group.to_dict() for group in backend.devices],
        },
        "env_vars": dict(observation.env_vars),
    }
    git = observation.git
    if git is not None and git.commit is not None:
        fields["code"] = {"commit": git.commit, "dirty": git.dirty}
    return fields
