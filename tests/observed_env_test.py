"""A colleague's recorded environment against this machine, through verify's drift rows
(the typed environment)."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.environment import environment_json, fingerprint
from ftmanifest.verify.environment import (
    compare_environment,
    load_environment,
    observed_environment,
)
from ftmanifest.verify.observe import Observed, observe

OTHER = Path(__file__).parent / "fixtures" / "environment" / "other-machine.json"


def _here(project: Path) -> Observed:
    return observe(load_manifest(project).manifest, project)


def test_this_machine_round_trips_and_matches_itself(project: Path) -> None:
    seen = _here(project)
    env = observed_environment(seen)
    again = load_environment(environment_json(env))
    assert again == env and fingerprint(again) == fingerprint(env)
    assert compare_environment(again, seen) == []
    bumped = env.model_copy(update={"python": "3.9.0"})
    assert fingerprint(bumped) != fingerprint(env)


def test_another_machine_differs_in_the_rows_verify_prints(project: Path) -> None:
    seen = _here(project)
    rows = compare_environment(load_environment(OTHER.read_bytes()), seen)
    fields = {f.field for f in rows}
    assert {
        "environment.python",
        "environment.packages.torch",
        "environment.backend.kind",
        "environment.backend.driver",
        "environment.backend.devices[0]",
        "environment.code.commit",
    } <= fields
    torch_row = next(f for f in rows if f.field == "environment.packages.torch")
    assert torch_row.expected == "==2.4.0+cu121" and torch_row.kind == "drift"
    # the same check functions as verify, so a row reads exactly like verify's
    assert {r.rule for r in rows} <= {
        "drift.python",
        "drift.package",
        "drift.backend",
        "drift.device",
        "drift.code",
        "drift.env-var",
        "drift.package-unpinned",
    }


def test_odd_probe_values_are_kept_as_unknown_not_a_crash() -> None:
    from ftmanifest.verify.environment import from_probe

    env = from_probe(
        {
            "python": "3.11.7",
            "backend": {
                "kind": "cuda",
                "devices": [{"name": " ", "memory_mib": 0, "count": 0, "compute_capability": None}],
            },
        }
    )
    [dev] = env.backend.devices
    assert (dev.name, dev.memory_mib, dev.count) == ("unknown device", None, 1)


def test_a_run_record_carries_the_environment_fingerprint(project: Path) -> None:
    from ftmanifest.ledger.runrecord import build
    from ftmanifest.verify import verify_manifest

    report = verify_manifest(project, signature=False)
    assert report.environment is not None
    record = build(report, status="verified")
    assert record["environment"]["fingerprint"] == fingerprint(report.environment)
    assert record["environment"]["code"]["commit"] == report.environment.code.commit
