"""drift.compare is pure: the GPU/backend rows are tested here on the CPU with
observations shaped as the probes report them on a CUDA or ROCm machine (through
``observed_env.from_probe``, as ``observe`` builds them)."""

from __future__ import annotations

from typing import Any

import pytest

from ftmanifest.manifest import load_manifest
from ftmanifest.snapshot import FileState, ModelState
from ftmanifest.verify.drift import compare
from ftmanifest.verify.drift_env import GIB
from ftmanifest.verify.environment import from_probe
from ftmanifest.verify.observe import Observed
from tests.conftest import CLF, EXTRACT


def _observed(manifest: Any, **changes: Any) -> Observed:
    """What a machine that matches ``manifest`` exactly would report."""
    m = manifest
    backend = m.environment.backend.model_dump()
    env: dict[str, Any] = {
        "python": m.environment.python,
        "backend": backend,
        "code": {"commit": m.environment.code.commit, "dirty": False},
    }
    files = {f.path: FileState(f.path, f.digest, f.size) for f in m.model.files}
    model = ModelState(
        folder="snap",
        commit=m.model.revision,
        source="hub-cache",
        files=files,
        tree_digest=m.model.tree_digest,
    )
    data = [FileState(e.path, e.digest, 10, records=e.records) for e in m.data]
    seen = Observed(
        environment=from_probe(env),
        installed={k: v.lstrip("=") for k, v in m.environment.packages.items()},
        env_values=dict(m.environment.env_vars),
        model=model,
        data=data,
        pinned={},
        disk_free=10**15,
        disk_path="/",
    )
    for key, value in changes.items():
        setattr(seen, key, value)
    return seen


def _set(seen: Observed, **fields: Any) -> None:
    """Change observed environment fields, as a probe on another machine would report them
    (``backend`` is merged into the observed one)."""
    data = seen.environment.model_dump()
    if "backend" in fields:
        fields["backend"] = {**data["backend"], **fields["backend"]}
    seen.environment = from_probe({**data, **fields})


@pytest.fixture(params=[CLF, EXTRACT], ids=["cuda", "rocm"])
def manifest(request: pytest.FixtureRequest) -> Any:
    return load_manifest(request.param).manifest


def test_a_matching_machine_has_no_drift(manifest: Any) -> None:
    assert compare(manifest, _observed(manifest)) == []


def test_cpu_only_machine_against_a_gpu_manifest(manifest: Any) -> None:
    seen = _observed(manifest)
    none = dict.fromkeys(("runtime", "dnn", "collectives", "driver"))
    _set(seen, backend={**none, "kind": "cpu", "devices": []})
    rows = {f.field: f for f in compare(manifest, seen)}
    assert rows["environment.backend.kind"].observed == "cpu"
    assert rows["environment.backend.driver"].observed == "absent"
    assert rows["environment.backend.devices[0]"].observed == "no accelerator"


def test_other_device_capability_and_fewer_devices(manifest: Any) -> None:
    seen = _observed(manifest)
    dev = manifest.environment.backend.devices[0].model_dump()
    fewer = max(1, dev["count"] - 1)
    _set(seen, backend={"devices": [{**dev, "compute_capability": "9.0", "count": fewer}]})
    rows = {f.field: f for f in compare(manifest, seen)}
    cc = rows["environment.backend.devices[0].compute_capability"]
    assert (cc.expected, cc.observed) == (dev["compute_capability"], "9.0")
    assert ("environment.backend.devices[0].count" in rows) == (fewer < dev["count"])


def test_device_matched_by_capability_when_the_name_differs(manifest: Any) -> None:
    seen = _observed(manifest)
    dev = manifest.environment.backend.devices[0].model_dump()
    _set(seen, backend={"devices": [{**dev, "name": dev["name"] + " (renamed)"}]})
    assert compare(manifest, seen) == []


def test_driver_and_runtime_versions(manifest: Any) -> None:
    seen = _observed(manifest)
    _set(seen, backend={"driver": "1.0", "runtime": "0"})
    fields = sorted(f.field for f in compare(manifest, seen))
    assert fields == ["environment.backend.driver", "environment.backend.runtime"]


def test_python_and_code(manifest: Any) -> None:
    seen = _observed(manifest)
    _set(seen, python="3.10.1", code={"commit": "0" * 40, "dirty": True})
    fields = sorted(f.field for f in compare(manifest, seen))
    assert fields == ["environment.code.commit", "environment.code.dirty", "environment.python"]


def test_disk_declared_is_an_error_and_estimated_is_a_warning() -> None:
    m = load_manifest(CLF).manifest
    weights = sum(f.size or 0 for f in m.model.files)
    [row] = compare(m, _observed(m, disk_free=weights))  # < 2 x weights, nothing declared
    assert row.field == "experiment.budget.disk_gib" and row.severity == "warning"
    declared = m.model_copy(
        update={
            "experiment": m.experiment.model_copy(
                update={"budget": m.experiment.budget.model_copy(update={"disk_gib": 5000.0})}
            )
        }
    )
    [row] = compare(declared, _observed(declared, disk_free=100 * GIB))
    assert row.severity == "error" and row.expected == ">= 5000.0 GiB"


def test_model_errors_and_snapshot_commit(manifest: Any) -> None:
    seen = _observed(manifest)
    seen.model.commit = "1" * 40
    [row] = compare(manifest, seen)
    assert row.field == "model.revision" and row.observed == "1" * 40
