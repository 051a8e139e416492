"""init --from a model as repo@revision or a folder, and data files: roles and formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.authoring.conftest import derived, fills, init_from
from tests.conftest import run_cli


def test_repo_at_branch_is_pinned_through_the_cache(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, payload, err = init_from(capsys, project / "exp.yaml", "org/tiny@main")
    got = derived(payload)
    assert rc == 0 and got["model.revision"] == hub["main"] and got["model.license"] == "apache-2.0"
    sources = {d["field"]: d["key"] for d in payload["derived"]}
    assert "refs/main" in sources["model.revision"]


def test_a_snapshot_folder_names_its_repo_and_commit(
    hub: dict[str, str], project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = tmp_path / "hf-cache" / "models--org--tiny" / "snapshots" / hub["main"]
    rc, payload, err = init_from(capsys, project / "exp.yaml", snap)
    got = derived(payload)
    assert rc == 0 and got["model.repo"] == "org/tiny" and got["model.revision"] == hub["main"]


def test_a_model_folder_is_a_path(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "base").mkdir()
    (project / "base" / "config.json").write_text("{}")
    rc, payload, err = init_from(capsys, project / "exp.yaml", project / "base")
    assert rc == 0 and derived(payload)["model.path"] == "base"
    assert "model.license" in fills(payload)


def test_an_uncached_repo_is_a_note_with_the_download_command(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, payload, err = init_from(capsys, project / "exp.yaml", "org/absent@v2")
    assert rc == 0 and derived(payload)["model.revision"] == "v2"
    assert "hf download org/absent --revision v2" in err


def test_roles_from_names_and_formats_from_content(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = project / "data"
    (data / "valid.json").write_text('[{"a": 1}, {"a": 2}]')
    (data / "notes.csv").write_text("text,label\nx,1\n")
    (data / "images").mkdir()
    (data / "images" / "a.png").write_bytes(b"\x89PNG\r\n")
    (data / "baseline_eval.parquet").write_bytes(b"PAR1" + b"\0" * 8)
    sources = ["valid.json", "notes.csv", "images", "baseline_eval.parquet", "train.jsonl"]
    rc, payload, err = init_from(capsys, project / "exp.yaml", *(data / s for s in sources))
    got = derived(payload)
    assert rc == 0, err
    assert [got[f"data[{i}].format"] for i in range(5)] == [
        "json", "csv", "images", "parquet", "jsonl"
    ]  # fmt: skip
    assert got["data[0].role"] == "eval" and got["data[3].role"] == "baseline-eval"
    assert "data[1].role" in fills(payload) and "data[2].role" in fills(payload)
    assert not any(f.endswith("sealed") for f in fills(payload))  # no test split


def test_a_missing_source_is_exit_2_with_the_field(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli("init", str(project / "exp.yaml"), "--from", str(project / "nope.yml"))
    rc, err = result.returncode, result.stderr
    assert rc == 2 and "nope.yml" in err and "--from" in err and "Traceback" not in err


def test_a_data_file_outside_the_manifests_folder_is_named_in_a_note(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "manifests").mkdir()
    rc, payload, err = init_from(capsys, project / "manifests" / "exp.yaml", project / "data")
    assert rc == 0, err
    assert any("outside the manifest's folder" in n and "--allow-outside" in n
               for n in payload["notes"])  # fmt: skip
    rc, payload, err = init_from(capsys, project / "exp.yaml", project / "data")
    assert not any("outside the manifest's folder" in n for n in payload["notes"])  # control
