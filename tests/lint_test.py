"""The lint rules, called directly on plain manifest data: one pass and one refusal each."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.lint import lint_document
from ftmanifest.manifest import load_document
from ftmanifest.manifest.lint_rules import RULES
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
    "FTM012": (_drop("environment", "code"), ("environment", "code", "commit")),
    "FTM020": (_drop("environment", "backend", "driver"), ("environment", "backend", "driver")),
    "FTM030": (_drop("seeds", "numpy"), ("seeds", "numpy")),
    "FTM040": (_drop("data", 0, "license"), ("data", 0, "license")),
    "FTM041": (_unseal, ("data", 2, "sealed")),
    "FTM050": (_set([], "method", "target_modules"), ("method", "target_modules")),
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


# --- FTM050: LoRA targets as peft reads them ------------------------


@pytest.mark.parametrize(
    "targets", ["all-linear", "ALL-LINEAR", r".*\.(q|v)_proj", ["q_proj", "v_proj"]]
)
def test_lora_targets_may_be_all_linear_a_regex_or_names(targets: Any) -> None:
    """'all-linear' and a regex are what peft accepts; lint refused them before."""
    data = _good()
    data["method"]["target_modules"] = targets
    assert list(RULES["FTM050"].check(data)) == []


@pytest.mark.parametrize("targets", [None, [], "", "  "])
def test_absent_or_empty_lora_targets_are_refused(targets: Any) -> None:
    data = _good()
    data["method"]["target_modules"] = targets
    (problem,) = RULES["FTM050"].check(data)
    assert problem.loc == ("method", "target_modules")


@pytest.mark.parametrize(
    ("field", "value", "loc"),
    [
        ("target_modules", r".*\.(q|v_proj", ("method", "target_modules")),
        ("exclude_modules", "[down", ("method", "exclude_modules")),
        ("rank_pattern", {"q_proj": 4, "v(": 8}, ("method", "rank_pattern", "v(")),
        ("alpha_pattern", {"*o_proj": 8}, ("method", "alpha_pattern", "*o_proj")),
        # peft puts a modules_to_save entry unescaped inside its own regex
        ("modules_to_save", ["lm_head("], ("method", "modules_to_save")),
    ],
)
def test_a_pattern_peft_cannot_compile_is_named(field: str, value: Any, loc: tuple[Any]) -> None:
    data = _good()
    data["method"][field] = value
    (problem,) = RULES["FTM050"].check(data)
    assert problem.loc == loc
    assert problem.observed in (value if isinstance(value, str) else list(value))
    assert str(problem.observed) in problem.message and problem.hint


def test_a_declared_peft_method_has_its_patterns_checked_too() -> None:
    data = _good()
    config = {"target_modules": "(q|v_proj", "feedforward_modules": []}
    data["method"] = {"kind": "peft", "peft_type": "IA3", "config": config}
    (problem,) = RULES["FTM050"].check(data)
    assert problem.loc == ("method", "config", "target_modules")
    data["method"]["config"]["target_modules"] = ["q_proj", "v_proj"]
    assert list(RULES["FTM050"].check(data)) == []


def test_full_fine_tuning_has_no_targets_to_check() -> None:
    data = _good()
    data["method"] = {"kind": "full"}
    assert list(RULES["FTM050"].check(data)) == []


@given(st.text(alphabet="()[]{}*+?|.\\^$_qkv0-9", max_size=12))
@settings(max_examples=300, deadline=None)
def test_lint_refuses_a_regex_exactly_when_peft_cannot_use_it(pattern: str) -> None:
    """Differential: lint's verdict on a target regex and on a rank_pattern key is
    whether peft's own matching (``check_target_module_exists``, ``get_pattern_key``)
    raises on them."""
    import re

    from peft.tuners.tuners_utils import check_target_module_exists
    from peft.utils.other import get_pattern_key

    class Config:
        exclude_modules = None
        modules_to_save = None
        target_parameters = None
        target_modules = pattern

    def raises(fn: Any) -> bool:
        try:
            fn()
        except re.error:
            return True
        return False

    data = _good()
    data["method"]["target_modules"] = pattern or "x"
    data["method"]["rank_pattern"] = {pattern or "x": 4}
    locs = {p.loc[:2] for p in RULES["FTM050"].check(data)}
    target_bad = (
        bool(pattern)
        and pattern.lower() != "all-linear"
        and raises(lambda: check_target_module_exists(Config, "model.layers.0.q_proj"))
    )
    key_bad = raises(lambda: get_pattern_key([pattern or "x"], "model.layers.0.q_proj"))
    assert (("method", "target_modules") in locs) == target_bad
    assert (("method", "rank_pattern") in locs) == key_bad
