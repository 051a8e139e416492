"""Two nodes, one verdict: real ``torchrun --nnodes 2`` agents on one machine.

Each agent runs in its own UTS and mount namespace (``tests.distributed.nodes``):
node-b can be given other arguments, or its own copy of a folder at the path both
nodes read.  Each case failed before the ranks agreed on one verdict: node-b's extra
``--accept`` passed node-b while node-a refused; ``lock`` kept node-a's digests;
``data check`` judged only rank 0's copy; ``scan`` printed "nothing found" for a
token only node-b's copy holds; torchrun's agent SIGTERMed a node's slower ranks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.distributed.nodes import (
    exit_statuses,
    four_rank_example,
    needs_nodes,
    two_nodes,
)

pytestmark = needs_nodes


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return four_rank_example(tmp_path_factory.mktemp("example"))


def _project(example: Path, folder: Path) -> Path:
    shutil.copytree(example.parent, folder)
    return folder / example.name


def _verify(manifest: Path, *extra: str) -> list[str]:
    return ["verify", str(manifest), "--no-signature", "--distributed", "--rank-timeout", "60",
            *extra]  # fmt: skip


def _other_train(project: Path, where: Path) -> Path:
    """A copy of the project's data folder whose train split has one more record."""
    shutil.copytree(project / "data", where)
    train = where / "train.jsonl"
    train.write_text(train.read_text("utf-8") + train.read_text("utf-8").splitlines()[0] + "\n")
    return where


def test_identical_nodes_pass_on_every_rank(example: Path, tmp_path: Path) -> None:
    manifest = _project(example, tmp_path / "p")
    job = two_nodes(tmp_path / "job", _verify(manifest))
    assert job.codes() == {0: 0, 1: 0, 2: 0, 3: 0}, job.log
    assert job.on("node-a") == [0, 1] and job.on("node-b") == [2, 3]
    assert "OK: 4 ranks agree with each other and the manifest" in job.ranks[0].out


def test_an_accept_given_to_one_node_only_refuses_every_rank(example: Path, tmp_path: Path) -> None:
    manifest = _project(example, tmp_path / "p")
    argv = _verify(manifest)
    job = two_nodes(
        tmp_path / "job", argv,
        argv_b=[*argv, "--accept", "distributed.nodes", "--reason", "only node-b says so"],
    )  # fmt: skip
    assert job.codes() == {0: 1, 1: 1, 2: 1, 3: 1}, job.log
    for rank in range(4):
        err = job.ranks[rank].err
        assert "the ranks were started with different arguments" in err, (rank, err)
        assert "ranks 2,3 (node-b): --accept differs from rank(s) 0,1" in err, (rank, err)
    # each rank exited with the job's code: torchrun's agents saw no rank killed (-15)
    statuses = {**exit_statuses(job.logs[0]), **exit_statuses(job.logs[1])}
    assert statuses and set(statuses.values()) == {1}, job.log


def test_lock_refuses_when_node_b_holds_other_data(example: Path, tmp_path: Path) -> None:
    manifest = _project(example, tmp_path / "p")
    before = manifest.read_text("utf-8")
    theirs = _other_train(manifest.parent, tmp_path / "node-b-data")
    argv = ["lock", str(manifest), "--distributed", "--rank-timeout", "60"]
    job = two_nodes(tmp_path / "job", argv, views={1: {theirs: manifest.parent / "data"}})
    assert job.codes() == {0: 1, 1: 1, 2: 1, 3: 1}, job.log
    err = job.ranks[0].err
    assert "not every node's copy is the one lock judges" in err, err
    assert "ranks 2,3 (node-b): its copy differs on data[0].digest" in err, err
    assert manifest.read_text("utf-8") == before  # nothing written


def test_data_check_refuses_a_node_whose_copy_differs_from_the_pin(
    example: Path, tmp_path: Path
) -> None:
    manifest = _project(example, tmp_path / "p")
    theirs = _other_train(manifest.parent, tmp_path / "node-b-data")
    argv = ["data", "check", str(manifest), "--distributed", "--rank-timeout", "60",
            "--examples", "0"]  # fmt: skip
    job = two_nodes(tmp_path / "job", argv, views={1: {theirs: manifest.parent / "data"}})
    assert job.codes() == {0: 1, 1: 1, 2: 1, 3: 1}, job.log
    err = job.ranks[0].err
    assert "ranks 2,3 (node-b): its copy differs on data[0].digest" in err, err
    assert "OK" not in job.ranks[0].out


def test_scan_shows_a_token_that_only_node_b_holds(example: Path, tmp_path: Path) -> None:
    manifest = _project(example, tmp_path / "p")
    theirs = tmp_path / "node-b-data"
    shutil.copytree(manifest.parent / "data", theirs)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    (theirs / "train.jsonl").write_text(
        (theirs / "train.jsonl").read_text("utf-8") + f'{{"text": "key {token}"}}\n'
    )
    argv = ["scan", str(manifest.parent / "data"), "--distributed", "--rank-timeout", "60"]
    job = two_nodes(tmp_path / "job", argv, views={1: {theirs: manifest.parent / "data"}})
    assert job.codes() == {0: 1, 1: 1, 2: 1, 3: 1}, job.log
    out = job.ranks[0].out
    assert "secret.github-pat" in out and "(only on ranks 2,3 (node-b))" in out, out
    assert token not in out  # never the whole secret


def test_one_changed_model_file_on_node_b_is_one_row_that_accept_clears(
    example: Path, tmp_path: Path
) -> None:
    manifest = _project(example, tmp_path / "p")
    theirs = tmp_path / "node-b-model"
    shutil.copytree(manifest.parent / "model", theirs)
    (theirs / "config.json").write_text((theirs / "config.json").read_text() + "\n")
    views = {1: {theirs: manifest.parent / "model"}}
    job = two_nodes(tmp_path / "job", _verify(manifest), views=views)
    assert job.codes() == {0: 1, 1: 1, 2: 1, 3: 1}, job.log
    rows = [line for line in job.ranks[0].out.splitlines() if "config.json" in line
            or "model.files[" in line]  # fmt: skip
    assert len(rows) == 1, job.ranks[0].out
    assert rows[0].startswith("2,3 "), rows
    field = rows[0].split()[2]
    assert field.startswith("model.files["), rows
    again = two_nodes(tmp_path / "job2", _verify(manifest, "--accept", field, "--reason",
                                                     "node-b's config differs by a newline"),
                      views=views)  # fmt: skip
    assert again.codes() == {0: 0, 1: 0, 2: 0, 3: 0}, again.log
