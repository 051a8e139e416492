"""verify's policy scan reads a pinned hub snapshot's files, not only a local model folder."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import HUB_MANIFEST, hub_project

POLICY = "security:\n  scan: {on: [verify], pickles: true, secrets: true, pii: false}\n"


class _Gadget:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, ("echo owned",))


@pytest.fixture
def hub_with_pickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, str]]:
    config = b'{"model_type": "llama"}'
    return hub_project(
        tmp_path,
        monkeypatch,
        {
            name: {"config.json": config, "pytorch_model.bin": pickle.dumps(payload, protocol=2)}
            for name, payload in (("good", {"w": [1.0, 2.0]}), ("bad", {"w": _Gadget()}))
        },
        main="good",
        manifest=HUB_MANIFEST + POLICY,
    )


def test_a_gadget_in_the_pinned_snapshot_is_refused(
    hub_with_pickles: tuple[Path, dict[str, str]],
) -> None:
    manifest, commits = hub_with_pickles
    lock_manifest(manifest)
    assert verify_manifest(manifest, signature=False).ok  # the good snapshot scans clean
    manifest.write_text(manifest.read_text().replace(commits["good"], commits["bad"]))
    lock_manifest(manifest)  # pinned, digests and all, onto a snapshot whose weights are a gadget
    assert verify_manifest(manifest, signature=False, scan=False).ok
    report = verify_manifest(manifest, signature=False)
    rows = [f for f in report.findings if f.kind == "unsafe-pickle"]
    assert rows and rows[0].path and rows[0].path.endswith("pytorch_model.bin")
    assert not report.ok
