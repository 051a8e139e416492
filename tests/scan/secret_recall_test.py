"""Recall of the format rules on ``secret_corpus``, and their silence on look-alikes.

A token counts as found only when a rule that knows its format reports it: not the
generic ``*_KEY=`` assignment, and not the curl ``Authorization:`` header rule
(except for the curl family itself), so each of the 91 families is held by its own
shape in all eight contexts.  Before the provider rules, 65 of the families added
with them had no format rule at all.
"""

from __future__ import annotations

import pytest

from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES
from tests.scan.secret_corpus import CURL_ONLY, FAMILIES, lookalike_lines, ordinary_lines, tokens

PER_FAMILY = 24


def _by_format(line: str, engine: str, family: str = "") -> bool:
    found = scan_buffer(line.encode(), path="corpus", pii=False, engine=engine)
    curl_ok = family in CURL_ONLY
    return any(
        f.kind == "secret" and "generic" not in f.rule and (curl_ok or "curl-auth" not in f.rule)
        for f in found
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_each_family_and_the_whole_corpus_are_found_by_format(engine: str) -> None:
    per = {
        fam: sum(_by_format(line, engine, fam) for line, _ in tokens(fam, PER_FAMILY))
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


@pytest.mark.parametrize("engine", ENGINES)
def test_placeholders_and_look_alikes_are_rarely_flagged(engine: str) -> None:
    """Placeholders, env references, tokens cut short in prose, digests, UUIDs, base64
    images: at most 10% flagged by any rule (the generic warning takes most of them:
    a random value cut short after ``*_TOKEN=`` still looks like a password)."""
    lines = lookalike_lines()
    flagged = [
        line for line in lines if scan_buffer(line.encode(), path="x", pii=False, engine=engine)
    ]
    assert len(lines) > 700 and len(flagged) <= 0.10 * len(lines)
    by_format = [line for line in flagged if _by_format(line, engine)]
    assert len(by_format) <= 0.01 * len(lines)


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
