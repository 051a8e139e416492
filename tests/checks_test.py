"""The check seam: drift is a registry of named checks, and a new one plugs in."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ftmanifest.checks import FunctionCheck, registry, run_checks
from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding
from ftmanifest.manifest import load_manifest
from ftmanifest.verify.drift import DRIFT_CHECKS, compare
from ftmanifest.verify.observe import Observed
from tests.conftest import CLF
from tests.verify.drift_test import _observed


def test_every_drift_check_reads_only_what_observe_provides() -> None:
    fields = {f.name for f in dataclasses.fields(Observed)}
    for name, check in DRIFT_CHECKS.items():
        assert check.name == name
        assert set(check.needs) <= fields, (name, check.needs)


def test_only_runs_the_named_checks_and_unknown_names_are_refused() -> None:
    m = load_manifest(CLF).manifest
    seen = _observed(m)
    seen.environment = seen.environment.model_copy(update={"python": "3.10.0"})
    seen.disk_free = 0
    assert {f.rule for f in compare(m, seen)} >= {"drift.python", "drift.disk"}
    assert [f.rule for f in compare(m, seen, only=["python"])] == ["drift.python"]
    with pytest.raises(UsageError, match="unknown check"):
        compare(m, seen, only=["pyhton"])


def test_a_new_check_plugs_in_and_a_missing_need_is_a_bug() -> None:
    def always(manifest: Any, subject: Any) -> list[Finding]:
        return [Finding(kind="audit", rule="audit.demo", message=f"{subject.thing}")]

    class Subject:
        thing = "x"

    checks = registry(FunctionCheck("demo", ("thing",), always))
    assert [f.message for f in run_checks(checks, None, Subject())] == ["x"]
    with pytest.raises(AttributeError, match="needs"):
        run_checks(registry(FunctionCheck("demo", ("other",), always)), None, Subject())
    with pytest.raises(ValueError, match="two checks"):
        registry(FunctionCheck("a", (), always), FunctionCheck("a", (), always))
