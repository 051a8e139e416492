"""The one walk over a manifest's pinned files: field, path and digest, in order."""

from __future__ import annotations

from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.pinned import pinned_files
from tests.conftest import CLF


def test_pinned_files_of_an_example() -> None:
    m = load_manifest(CLF).manifest
    pins = pinned_files(m)
    assert [p.field for p in pins] == [
        "environment.lock",
        "data[0].cleaning[0]",
        "data[0].transforms[0]",
        "evaluation.baseline.results",
        "evaluation.baseline.config",
    ]
    assert pins[0].path == m.environment.lock.path  # type: ignore[union-attr]
    assert pins[0].digest == m.environment.lock.digest  # type: ignore[union-attr]
    assert pins[2].path == m.data[0].transforms[0].path
    assert all(p.digest and p.digest.startswith("sha256:") for p in pins)


def test_unlocked_manifest_pins_nothing_extra() -> None:
    m = load_manifest(CLF).manifest
    bare = m.model_copy(
        update={
            "environment": m.environment.model_copy(update={"lock": None}),
            "data": [e.model_copy(update={"cleaning": [], "transforms": []}) for e in m.data],
            "evaluation": m.evaluation.model_copy(
                update={
                    "baseline": m.evaluation.baseline.model_copy(
                        update={"results": None, "config": None}
                    )
                }
            ),
        }
    )
    assert pinned_files(bare) == []
