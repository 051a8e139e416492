"""The lint rules, called directly on plain manifest data: one pass and one refusal each."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ftmanifest.lint import RULES, lint_document
from ftmanifest.manifest import load_document
from tests.conftest import CLF

Data = dict[str, Any]


def _good() -> Data:
    data = load_document(CLF).data
    assert isinstance(data, dict)
    return copy.deepcopy(data)


def _drop(*path: str | int) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        node: Any = data
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


def _set(value: Any, *path: str | int) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        node: Any = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return mutate


def _unseal(data: Data) -> None:
    for entry in data["data"]:
        entry.pop("sealed", None)


def _global_guards_only(data: Data) -> None:
    data["experiment"]["guards"] = [
        g for g in data["experiment"]["guards"] if g["kind"] != "per_category"
    ]


# rule id -> (mutation that breaks it, field location of the first problem)
FAILING: dict[str, tuple[Callable[[Data], None], tuple[str | int, ...]]] = {
    "FTM001": (_set("main", "model", "revision"), ("model", "revision")),
    "FTM002": (_drop("model", "tree_digest"), ("model", "tree_digest")),
    "FTM010": (
        _set(">=2.0", "environment", "packages", "torch"),
        ("environment", "packages", "torch"),
    ),
    "FTM011": (_set("3.11", "environment", "python"), ("environment", "python")),
    "FTM020": (_drop("environment", "backend", "driver"), ("environment", "backend", "driver")),
    "FTM030": (_drop("seeds", "numpy"), ("seeds", "numpy")),
    "FTM040": (_drop("data", 0, "license"), ("data", 0, "license")),
    "FTM041": (_unseal, ("data", 2, "sealed")),
    "FTM050": (_set("all-linear", "method", "target_modules"), ("method", "target_modules")),
    "FTM060": (_drop("training", "grad_accum"), ("training", "grad_accum")),
    "FTM070": (_set("  ", "experiment", "hypothesis"), ("experiment", "hypothesis")),
    "FTM071": (_global_guards_only, ("experiment", "guards")),
}


def test_every_rule_has_a_failing_case() -> None:
    assert set(FAILING) == set(RULES)


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_passes_a_pinned_manifest(rule_id: str) -> None:
    assert list(RULES[rule_id].check(_good())) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_refuses_its_defect(rule_id: str) -> None:
    mutate, loc = FAILING[rule_id]
    data = _good()
    mutate(data)
    problems = list(RULES[rule_id].check(data))
    assert problems, f"{rule_id} passed a manifest it should refuse"
    assert problems[0].loc == loc
    assert problems[0].message and problems[0].hint
    # the defect belongs to this rule alone: every other rule still passes
    others = {r.id for r in RULES.values() if r.id != rule_id and list(r.check(data))}
    assert others == set()


def test_model_files_without_any_file() -> None:
    data = _good()
    data["model"]["files"] = []
    locs = [p.loc for p in RULES["FTM002"].check(data)]
    assert locs == [("model", "files")]


def test_model_file_without_digest() -> None:
    data = _good()
    del data["model"]["files"][0]["digest"]
    locs = [p.loc for p in RULES["FTM002"].check(data)]
    assert locs == [("model", "files", 0)]


def test_local_model_without_repo_needs_no_revision() -> None:
    data = _good()
    del data["model"]["repo"], data["model"]["revision"]
    assert list(RULES["FTM001"].check(data)) == []


def test_python_prerelease_is_exact() -> None:
    data = _good()
    data["environment"]["python"] = "3.13.0rc1"
    assert list(RULES["FTM011"].check(data)) == []


def test_backend_kind_absent() -> None:
    data = _good()
    del data["environment"]["backend"]["kind"]
    locs = [p.loc for p in RULES["FTM020"].check(data)]
    assert locs == [("environment", "backend", "kind")]


@pytest.mark.parametrize("kind", ["cpu", "mps"])
def test_backend_without_runtime_needs_none(kind: str) -> None:
    data = _good()
    data["environment"]["backend"] = {"kind": kind}
    assert list(RULES["FTM020"].check(data)) == []


def test_no_guards_at_all() -> None:
    data = _good()
    data["experiment"]["guards"] = []
    problems = list(RULES["FTM071"].check(data))
    assert [p.observed for p in problems] == ["none"]


def test_non_classification_needs_no_per_category_guard() -> None:
    data = _good()
    _global_guards_only(data)
    data["experiment"]["task"] = "extraction"
    assert list(RULES["FTM071"].check(data)) == []


def test_lint_document_passes_a_pinned_manifest() -> None:
    assert lint_document(load_document(CLF)) == []
