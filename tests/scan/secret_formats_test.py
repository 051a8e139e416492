"""Each format rule finds its own examples and none of its look-alikes, with both engines."""

from __future__ import annotations

import pytest

from ftmanifest.scan.text.secret_formats import FORMAT_RULES
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES

TP = [(r.id, ex) for r in FORMAT_RULES for ex in r.true_positives]
FP = [(r.id, ex) for r in FORMAT_RULES for ex in r.false_positives]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("rule", "example"), TP)
def test_true_positive(engine: str, rule: str, example: str) -> None:
    found = scan_buffer(example.encode(), path="x", engine=engine, pii=False)
    assert rule in {f.rule for f in found}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("rule", "example"), FP)
def test_false_positive(engine: str, rule: str, example: str) -> None:
    found = scan_buffer(example.encode(), path="x", engine=engine, pii=False)
    assert rule not in {f.rule for f in found}


def test_every_rule_has_examples_and_a_unique_id() -> None:
    assert all(r.true_positives and r.false_positives for r in FORMAT_RULES)
    assert len({r.id for r in FORMAT_RULES}) == len(FORMAT_RULES)
