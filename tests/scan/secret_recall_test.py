"""Recall of the format rules on ``secret_corpus``, and their silence on look-alikes.

A token counts as found only when a rule that knows its format (not the generic
``*_KEY=`` assignment) reports it: the generic rule drops UUIDs and hex strings,
which is how Heroku, HubSpot, Snyk, Sentry and Facebook keys were missed.
Before the format rules this corpus scored 0/528 by format (190 by the generic
rule alone).
"""

from __future__ import annotations

import pytest

from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES
from tests.scan.secret_corpus import FAMILIES, ordinary_lines, tokens

PER_FAMILY = 24


def _by_format(line: str, engine: str) -> bool:
    found = scan_buffer(line.encode(), path="corpus", pii=False, engine=engine)
    return any(f.kind == "secret" and "generic" not in f.rule for f in found)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_family_and_the_whole_corpus_are_found_by_format(engine: str) -> None:
    per = {
        fam: sum(_by_format(line, engine) for line, _ in tokens(fam, PER_FAMILY))
        for fam in FAMILIES
    }
    low = {fam: hit for fam, hit in per.items() if hit < 0.95 * PER_FAMILY}
    assert low == {}
    assert sum(per.values()) >= 0.95 * PER_FAMILY * len(FAMILIES)


@pytest.mark.parametrize("engine", ENGINES)
def test_digests_uuids_and_shas_in_ordinary_places_are_quiet(engine: str) -> None:
    lines = ordinary_lines()
    noisy = [
        (line, f.rule)
        for line in lines
        for f in scan_buffer(line.encode(), path="x", pii=False, engine=engine)
    ]
    assert len(lines) > 500 and noisy == []


def test_a_uuid_is_a_secret_only_beside_a_provider_word() -> None:
    key = "3b2e9c1d-7f4a-4e8b-9c2d-1a5f6e7d8c9b"
    assert not _by_format(f"dataset_id: {key}\n", "re")
    assert _by_format(f"SNYK_TOKEN={key}\n", "re")
    assert not _by_format(f"SNYK_ORG_ID={key}\n", "re")  # the same word, an identifier


def test_the_finding_never_shows_the_whole_token() -> None:
    for fam in FAMILIES:
        for line, tok in tokens(fam, 4):
            for f in scan_buffer(line.encode(), path="x", pii=False):
                shown = repr(f.to_dict())
                assert tok not in shown and tok[-12:] not in shown, (fam, f.rule)
