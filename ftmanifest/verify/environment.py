"""The environment observed here, as the manifest's own ``Environment`` model.

Layer: judging rooms - pure core (over ``observe.Observed``).  A colleague's recorded
environment (a run record, a ledger entry, another rank of a torchrun job) is
compared with this machine's through the same drift checks ``verify`` runs, so
the rows read the same.  The model serialises to JSON and has a stable
fingerprint (``manifest.environment.fingerprint``): the sha256 of its RFC 8785
canonical form.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ftmanifest.manifest.environment import Environment
from ftmanifest.verify.drift import compare

if TYPE_CHECKING:
    from ftmanifest.findings import Finding
    from ftmanifest.verify.observe import Observed

# The drift checks that read only the environment (not files, model or disk).
ENVIRONMENT_CHECKS = ("python", "packages", "backend", "env-vars", "code")


def from_probe(fields: Mapping[str, Any]) -> Environment:
    """The probes' ``environment`` fields (``probe.fields.to_environment_fields``) as
    the model.  A probe reports what a driver says; a value the manifest could
    not hold (an empty device name, zero memory) is kept as unknown rather than
    failing the whole observation."""
    data = dict(fields)
    backend = dict(data.get("backend") or {})
    backend["devices"] = [_device(d) for d in backend.get("devices") or []]
    data["backend"] = backend
    return Environment.model_validate(data)


def _device(raw: Mapping[str, Any]) -> dict[str, Any]:
    dev = dict(raw)
    dev["name"] = str(dev.get("name") or "").strip() or "unknown device"
    if not isinstance(dev.get("memory_mib"), int) or dev["memory_mib"] < 1:
        dev["memory_mib"] = None
    if not isinstance(dev.get("count"), int) or dev["count"] < 1:
        dev["count"] = 1
    return dev


def observed_environment(seen: Observed) -> Environment:
    """This machine's environment: what ``lock`` would pin, with the values of the
    environment variables the manifest names."""
    env_vars = dict(seen.environment.env_vars)
    env_vars.update({k: v for k, v in seen.env_values.items() if v is not None})
    return seen.environment.model_copy(update={"env_vars": env_vars})


def load_environment(text: str | bytes) -> Environment:
    """A recorded environment from its JSON (strict: unknown fields are refused)."""
    return Environment.model_validate_json(text)


def compare_environment(
    recorded: Environment, seen: Observed, *, env_values: Mapping[str, str | None] | None = None
) -> list[Finding]:
    """Drift rows of this machine (``seen``) against a recorded environment.

    ``env_values``: this machine's values of the recorded variables (default:
    those ``seen`` holds; a variable not observed here reads as unset, a row).
    """
    here = env_values if env_values is not None else seen.env_values
    values = {name: here.get(name) for name in recorded.env_vars}
    probe = SimpleNamespace(**{**vars(seen), "env_values": values})
    stand_in = SimpleNamespace(environment=recorded)
    return compare(stand_in, probe, only=ENVIRONMENT_CHECKS)  # type: ignore[arg-type]
