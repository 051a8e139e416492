"""Recall per kind of personal data on a corpus built from the standards, and no
finding on what ML logs are full of.

The corpus (``pii_corpus``) draws IBANs for every registry country, RFC 6531
addresses, cards of every major issuer range, the claimed national ids in
natural sentences and libphonenumber's example numbers for every region.
Each kind must be found at 95 % or more; the measured figure is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ftmanifest.scan.text import phones as phone_rules
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import AVAILABLE
from tests.scan.pii_corpus import Sample, all_kinds, negatives
from tests.scan.pii_forms_test import PHONE_HARD_NEGATIVES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _phones import NEGATIVES as PHONE_LOG_LINES  # noqa: E402

TARGET = 0.95


_GAP = "\n~~~~\n"  # between samples: no rule reads across it


def found(samples: list[Sample], engine: str = "re") -> list[bool]:
    """Whether a finding of an expected rule covers each sample's value (part of it at
    least); the samples of one phone region are scanned as one buffer, in that region."""
    out = [False] * len(samples)
    by_region: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        by_region.setdefault(s.region, []).append(i)
    for region, idx in by_region.items():
        buf, spans = b"", []
        for i in idx:
            text = samples[i].text.encode()
            at = len(buf) + text.index(samples[i].value.encode())
            spans.append((i, at, at + len(samples[i].value.encode())))
            buf += text + _GAP.encode()
        if region:
            phone_rules.set_regions([region])
        try:
            hits = scan_buffer(buf, path="corpus", secrets=False, engine=engine)
        finally:
            if region:
                phone_rules.set_regions(None)
        for i, start, end in spans:
            out[i] = any(
                f.rule in samples[i].rules
                and f.extra["span"][0] < end
                and start < f.extra["span"][1]
                for f in hits
            )
    return out


def recall(samples: list[Sample], engine: str = "re") -> tuple[float, list[Sample]]:
    missed = [s for s, ok in zip(samples, found(samples, engine), strict=True) if not ok]
    return 1 - len(missed) / len(samples), missed


KINDS = dict(all_kinds())


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_found_at_95_percent(kind: str) -> None:
    samples = KINDS[kind]
    got, missed = recall(samples)
    print(f"{kind}: {got:.3f} ({len(samples) - len(missed)}/{len(samples)})")
    assert got >= TARGET, [s.text for s in missed[:20]]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hyperscan_finds_the_same(kind: str) -> None:
    """Both engines confirm candidates with the same regex and validator."""
    if "hyperscan" not in AVAILABLE:
        pytest.skip("hyperscan is not importable here")
    samples = KINDS[kind]
    assert found(samples, "hyperscan") == found(samples, "re")


def _pii(text: str, engine: str) -> list[str]:
    found = scan_buffer(text.encode(), path="log", secrets=False, engine=engine)
    return [f.rule for f in found]


def test_ml_logs_digests_ids_and_metrics_are_quiet() -> None:
    lines = negatives() + list(PHONE_LOG_LINES)
    for engine in AVAILABLE:
        flagged = {line: _pii(line, engine) for line in lines}
        assert {k: v for k, v in flagged.items() if v} == {}, engine
    assert len(lines) > 900


def test_the_hard_negatives_of_the_phone_rules_stay_quiet_for_every_pii_rule() -> None:
    """The real IBAN, card and SSN among them are findings of their own rules only."""
    own = {"DE89 3704 0044 0532 0130 00": "pii.iban", "5105 1051 0510 5100": "pii.card-test-number",
           "536-22-1947": "pii.us-ssn"}  # fmt: skip
    for text in PHONE_HARD_NEGATIVES:
        assert _pii(text, "re") == ([own[text]] if text in own else []), text
