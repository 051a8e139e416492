"""What ``lock`` writes loads again: at 10,000 model files lock wrote a
1.36 MB manifest that both ``verify`` and ``lock`` then refused as "too large for a
manifest".  The manifest limit now admits such a folder, and lock checks what it
would write against the loader's own limits before writing: past them it refuses,
names the count and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.errors import InputError
from ftmanifest.manifest import load_manifest
from ftmanifest.verify.lock import lock_manifest


def _example(tmp_path: Path, extra: int) -> Path:
    pytest.importorskip("torch")
    from ftmanifest.examples.project import build_example

    manifest = build_example(tmp_path / "tiny")
    folder = manifest.parent / "model" / "extra"
    for i in range(extra):
        sub = folder / f"{i // 1000:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"part-{i:05d}.json").write_text(f'{{"i": {i}}}\n')
    return manifest


def test_a_model_of_ten_thousand_files_locks_and_loads_back(tmp_path: Path) -> None:
    manifest = _example(tmp_path, 10_000)
    lock_manifest(manifest, allow_outside=True)
    assert len(manifest.read_bytes()) > 1 << 20  # the old limit: unreadable before
    loaded = load_manifest(manifest)
    assert len(loaded.manifest.model.files) > 10_000


def test_lock_refuses_what_the_loader_would_refuse_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.manifest import yaml_syntax

    manifest = _example(tmp_path, 300)
    before = manifest.read_bytes()
    monkeypatch.setattr(yaml_syntax, "MAX_NODES", 600)  # a folder too large for the loader
    with pytest.raises(InputError) as caught:
        lock_manifest(manifest, allow_outside=True)
    err = caught.value
    assert "cannot be read back" in err.message and err.field == "model.files"
    assert "model.files would list 30" in (err.observed or "")
    assert "nothing was written" in (err.hint or "")
    assert manifest.read_bytes() == before
