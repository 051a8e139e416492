"""Tracing a loaded model's origin to the pinned snapshot, without torch.

The hub cache is conftest's ``hub`` fixture, laid out on disk as huggingface_hub
does it: ``org/tiny`` with snapshots v1 and v2, ``refs/main`` -> v2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ftmanifest.errors import InputError
from ftmanifest.hfcache import SnapshotNotFoundError
from ftmanifest.integrations.model_origin import (
    ORIGIN_RULE,
    WEIGHTS_RULE,
    Origin,
    Pinned,
    WeightCheck,
    hub_snapshot_of,
    judge_origin,
    judge_weights,
    name_and_commit,
    pinned_snapshot,
    read_origin,
    read_pinned,
)
from ftmanifest.manifest.environment import ModelSource
from tests.conftest import ROOT

A, B = "a" * 40, "b" * 40
Hub = tuple[Path, dict[str, str]]


def _snap(hub: Hub, name: str) -> Path:
    manifest, commits = hub
    root = manifest.parent.parent / "hf-cache" / "models--org--tiny" / "snapshots"
    return (root / commits[name]).resolve()


def _pinned_hub(hub: Hub, name: str = "v1") -> Pinned:
    manifest, commits = hub
    model = ModelSource(repo="org/tiny", revision=commits[name])
    return read_pinned(model, manifest, allow_outside=False)


def test_the_pinned_snapshot_folder_traces_and_another_one_is_refused(hub: Hub) -> None:
    manifest, commits = hub
    pinned = _pinned_hub(hub, "v1")
    assert pinned.folder == _snap(hub, "v1") and pinned.commit == commits["v1"]
    assert judge_origin(read_origin(str(_snap(hub, "v1")), None), pinned) == []

    [row] = judge_origin(read_origin(str(_snap(hub, "v2")), None), pinned)
    assert (row.kind, row.rule, row.field) == ("drift", ORIGIN_RULE, "model.revision")
    assert row.expected is not None and commits["v1"] in row.expected
    assert row.observed is not None and commits["v2"] in row.observed
    assert row.hint is not None and "load_pinned(" in row.hint and str(manifest) in row.hint


def test_a_symlink_to_the_pinned_folder_traces_a_relative_path_too(
    hub: Hub, tmp_path: Path
) -> None:
    pinned = _pinned_hub(hub)
    link = tmp_path / "model-link"
    link.symlink_to(_snap(hub, "v1"), target_is_directory=True)
    assert judge_origin(read_origin(str(link), None), pinned) == []
    assert judge_origin(read_origin("model-link", None, cwd=tmp_path), pinned) == []


def test_the_pinned_commit_in_another_cache_is_refused(hub: Hub, tmp_path: Path) -> None:
    """Same repo and commit name, other bytes possible: only the verified folder traces."""
    manifest, commits = hub
    other = tmp_path / "other-cache" / "models--org--tiny" / "snapshots" / commits["v1"]
    other.mkdir(parents=True)
    origin = read_origin(str(other), None)
    assert origin.snapshot == ("org/tiny", commits["v1"])
    [row] = judge_origin(origin, _pinned_hub(hub))
    assert "another cache" in row.message and str(other.resolve()) in (row.observed or "")


def test_a_repo_id_traces_through_refs_main_of_the_cache(hub: Hub) -> None:
    manifest, commits = hub  # refs/main -> v2
    origin = read_origin("org/tiny", None)
    assert origin.repo == "org/tiny" and origin.ref_commit == commits["v2"]
    assert judge_origin(origin, _pinned_hub(hub, "v2")) == []

    [row] = judge_origin(origin, _pinned_hub(hub, "v1"))
    assert row.field == "model.revision" and "refs/main" in (row.observed or "")
    assert commits["v1"] in (row.expected or "") and commits["v2"] in (row.observed or "")


def test_a_repo_without_refs_main_in_the_cache_is_refused(hub: Hub) -> None:
    manifest, commits = hub
    refs = manifest.parent.parent / "hf-cache" / "models--org--tiny" / "refs" / "main"
    refs.unlink()
    origin = read_origin("org/tiny", None)
    assert origin.ref_commit is None
    [row] = judge_origin(origin, _pinned_hub(hub, "v2"))
    assert "no refs/main" in (row.observed or "")


def test_another_repo_or_a_hub_model_for_a_local_manifest_is_refused(hub: Hub) -> None:
    [row] = judge_origin(read_origin("org/other", None), _pinned_hub(hub))
    assert row.field == "model.repo" and row.observed == "org/other"

    local = Pinned("m.yaml", None, None, _snap(hub, "v1"))
    [row] = judge_origin(read_origin("org/tiny", None), local)
    assert row.field == "model.path" and row.observed == "hub repo org/tiny"
    assert row.expected == str(_snap(hub, "v1"))


def test_a_recorded_commit_decides_over_refs_main() -> None:
    """transformers 4.x records the snapshot commit in ``config._commit_hash``."""
    pinned = Pinned("m.yaml", "org/tiny", A, None)
    other = Origin("org/tiny", B, repo="org/tiny", ref_commit=A)
    [row] = judge_origin(other, pinned)
    assert row.field == "model.revision" and row.expected and A in row.expected
    assert row.observed == f"org/tiny@{B} (config._commit_hash)"
    assert judge_origin(Origin("org/tiny", A, repo="org/tiny", ref_commit=B), pinned) == []
    folder_b = Origin("/x/snapshots/" + B, B, folder=Path("/x/snapshots/" + B))
    assert (
        judge_origin(folder_b, pinned)[0].observed == f"/x/snapshots/{B}@{B} (config._commit_hash)"
    )
    config = SimpleNamespace(_name_or_path="org/tiny", _commit_hash=A)
    assert name_and_commit(SimpleNamespace(config=config)) == ("org/tiny", A)


def test_no_origin_is_refused_with_the_opt_out_named() -> None:
    for pinned in (Pinned("m.yaml", "org/tiny", A, None), Pinned("m.yaml", None, None, Path("/m"))):
        [row] = judge_origin(read_origin("", None), pinned)
        assert row.rule == ORIGIN_RULE and row.observed and "empty" in row.observed
        assert row.loc == pinned.loc and row.hint and "trace_model=False" in row.hint
    assert name_and_commit(SimpleNamespace(config=SimpleNamespace(_name_or_path=""))) == ("", None)
    assert name_and_commit(None) == ("", None)


def test_another_local_folder_and_a_vanished_one_are_refused(tmp_path: Path) -> None:
    pinned_dir, other = tmp_path / "model", tmp_path / "copy"
    pinned_dir.mkdir()
    other.mkdir()
    pinned = Pinned("m.yaml", None, None, pinned_dir.resolve())
    assert judge_origin(read_origin(str(pinned_dir), None), pinned) == []
    [row] = judge_origin(read_origin(str(other), None), pinned)
    assert row.field == "model.path" and row.observed == str(other.resolve())
    [row] = judge_origin(read_origin(str(tmp_path / "gone" / "x"), None), pinned)
    assert row.observed and row.observed.endswith("(not a folder here)")


def test_hub_snapshot_folders_are_recognised() -> None:
    root = Path("/c/models--org--tiny/snapshots")
    assert hub_snapshot_of(root / A) == ("org/tiny", A)
    assert hub_snapshot_of(Path("/c/models--a--b--c/snapshots") / A) == ("a/b/c", A)
    assert hub_snapshot_of(root / "main") is None
    assert hub_snapshot_of(Path("/c/datasets--org--tiny/snapshots") / A) is None


def test_differing_weights_are_a_row_of_their_own() -> None:
    pinned = Pinned("m.yaml", "org/tiny", A, Path("/snap"))
    assert judge_weights(WeightCheck(21), pinned) == []
    [row] = judge_weights(WeightCheck(21, ("a.weight", "b.weight", "c.weight", "d.weight")), pinned)
    assert (row.rule, row.field) == (WEIGHTS_RULE, "model.files")
    assert row.observed == "4 of 21 tensors differ (a.weight, b.weight, c.weight, ...)"
    assert row.expected == f"the weights of org/tiny@{A} (/snap)"
    [row] = judge_weights(WeightCheck(0, (), "SafetensorError: header too large"), pinned)
    assert row.observed == "not compared: SafetensorError: header too large"


def test_the_pinned_snapshot_must_be_a_commit_that_is_here(hub: Hub) -> None:
    manifest, commits = hub
    with pytest.raises(InputError) as err:
        pinned_snapshot(
            ModelSource(repo="org/tiny", revision="main"), manifest, allow_outside=False
        )
    assert err.value.field == "model.revision" and "ftmanifest lock" in (err.value.hint or "")
    with pytest.raises(SnapshotNotFoundError) as missing:
        pinned_snapshot(
            ModelSource(repo="org/tiny", revision="f" * 40), manifest, allow_outside=False
        )
    assert "huggingface-cli download" in (missing.value.hint or "")
    # verify already has a row for the missing snapshot; the trace only loses its folder
    pinned = read_pinned(
        ModelSource(repo="org/tiny", revision="main"), manifest, allow_outside=False
    )
    assert (pinned.commit, pinned.folder) == (None, None)


def test_importing_the_tracer_and_the_loader_imports_no_framework() -> None:
    code = (
        "import sys, ftmanifest.integrations.model_origin, ftmanifest.integrations.pinned\n"
        "heavy = {'torch', 'transformers', 'peft'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=os.environ
    )
    assert result.returncode == 0, result.stderr
